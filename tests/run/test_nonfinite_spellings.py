"""A NaN or Inf loss is read as one, at its step, whatever runtime printed it: C printf's
`-nan`, Python's `{:E}` (`NAN`, Megatron's format), MSVC's `nan(ind)` and `1.#QNAN`, Go's
`+Inf`, a JSON writer's `"NaN"` string, torch's `tensor(nan, device=...)` printed without
`.item()`. The row is never dropped, never read as a 1 or as not logged, and the table is
neither cut nor turned to text."""

import json
import math

import numpy as np
import pytest

from postmortem.run import read_run
from postmortem.run.dialects import catalogue
from postmortem.run.nonfinite import nonfinite

BAD = (20, 21)          # the rows whose loss is not finite
N = 40


def _losses(spelling: str) -> list[tuple[int, str]]:
    return [((i + 1) * 10, spelling if i in BAD else f"{3 - i / 50:.4f}") for i in range(N)]


def _assert_read(run, expected: float) -> None:
    f = run.frame
    assert len(f) == N and len(run.segments()) == 1
    assert f.loss.dtype.kind == "f"
    loss = f.loss.to_numpy()
    at = np.array(BAD)          # rows in file order (Keras' bar prints no step: its ordinal is one)
    if math.isnan(expected):
        assert run.nan_mask("loss")[at].all() and run.nan_mask("loss").sum() == len(BAD)
    else:
        assert (loss[at] == expected).all()
    assert np.isfinite(np.delete(loss, at)).all()


@pytest.mark.parametrize("word, value", [
    ("nan", math.nan), ("-nan", math.nan), ("NAN", math.nan), ("NaN", math.nan),
    ("nan(ind)", math.nan), ("-nan(ind)", math.nan), ("1.#QNAN", math.nan), ("-1.#IND", math.nan),
    ("1.#QNAN0", math.nan), ("1.#INF", math.inf), ("-1.#INF", -math.inf), ("+Inf", math.inf),
    ("-Inf", -math.inf), ("INF", math.inf), ("Infinity", math.inf), ("-Infinity", -math.inf),
    ("\u221e", math.inf),
])
def test_every_spelling_is_its_value(word, value):
    got = nonfinite(word)
    assert got is not None and (math.isnan(got) if math.isnan(value) else got == value)


@pytest.mark.parametrize("word", ["nano", "info", "1.5", "index", ""])
def test_words_that_are_no_number_are_not_read_as_one(word):
    assert nonfinite(word) is None


# Lines as the frameworks' format strings print them (see the catalogue's `source`s):
# Megatron `' {}: {:.6E} |'.format(key, avg)` (training.py training_log), nanoGPT
# `f"iter {iter_num}: loss {lossf:.4f}, time ..."`, llm.c `printf("step %4d/%d | train loss %f |")`,
# a C++ trainer's printf (glibc `-nan`, MSVC `-nan(ind)` / `1.#QNAN`), Keras' progbar.
LINES = {
    "megatron": lambda s, v: (f" iteration {s:8d}/    1000 | consumed samples: {s * 8:12d} | elapsed time per "
                              f"iteration (ms): 123.4 | learning rate: 1.000000E-04 | global batch size:     8 | "
                              f"lm loss: {v} | loss scale: 65536.0 | grad norm: 1.234 | number of skipped "
                              f"iterations:   0 | number of nan iterations:   0 |"),
    "nanogpt": lambda s, v: f"iter {s}: loss {v}, time 12.34ms, mfu 40.00%",
    "llm.c": lambda s, v: f"step {s:4d}/1000 | train loss {v} | norm 1.2345 | lr 6.00e-04 | 120.00 ms | 40.0% bf16 MFU",
    "kv-pipe": lambda s, v: f"step {s} | loss {v} | lr 0.0001",
    "keras": lambda s, v: f"100/100 [==============================] - 1s 10ms/step - loss: {v} - accuracy: 0.5000",
    "key=value": lambda s, v: f"step={s} loss={v} lr=0.0001",
}
SPELLINGS = [("NAN", math.nan), ("-nan", math.nan), ("-nan(ind)", math.nan), ("1.#QNAN", math.nan),
             ("-1.#IND", math.nan), ("1.#INF", math.inf), ("+Inf", math.inf)]


@pytest.mark.parametrize("family", LINES)
@pytest.mark.parametrize("word, value", [("1.#QNAN", math.nan), ("-1.#IND", math.nan), ("1.#INF", math.inf)])
def test_text_log_keeps_the_nonfinite_row(tmp_path, family, word, value):
    """MSVC's spellings (a Windows C++ trainer's printf): read as a 1 before."""
    p = tmp_path / "train.log"
    p.write_text("".join(LINES[family](s, v) + "\n" for s, v in _losses(word)))
    _assert_read(read_run(p), value)


def test_the_catalogue_number_takes_every_spelling_whole():
    """Each progress pattern's captured loss is the whole word, not MSVC's `1.` of `1.#QNAN`."""
    seen = 0
    for d in catalogue("progress"):
        ex = next(iter(d.examples), None)
        m = d.pattern.search(ex) if ex else None
        if m is None or m.groupdict().get("loss") is None or d.id == "fairseq.summary":
            continue
        a, b = m.span("loss")
        for word, _ in SPELLINGS:
            again = d.pattern.search(ex[:a] + word + ex[b:])
            assert again is not None and again.group("loss") == word, (d.id, word)
        seen += 1
    assert seen >= 5


@pytest.mark.parametrize("line", [
    "step {s} loss tensor({v}, device='cuda:0', grad_fn=<AddBackward0>)",
    "Step: {s}, Loss: tensor({v}, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "step {s} loss tensor([{v}])",
    "step {s} loss: tf.Tensor({v}, shape=(), dtype=float32)",
    "{{'step': {s}, 'loss': np.float32({v})}}",
])
def test_a_loss_printed_as_a_tensor_keeps_its_nan(tmp_path, line):
    p = tmp_path / "train.log"
    p.write_text("".join(line.format(s=s, v=v) + "\n" for s, v in _losses("nan")))
    run = read_run(p)
    _assert_read(run, math.nan)
    assert "cuda" not in run.frame.columns


@pytest.mark.parametrize("word, value", SPELLINGS + [("nan", math.nan), ("inf", math.inf)])
def test_a_tab_separated_table_keeps_the_nonfinite_row(tmp_path, word, value):
    """HF's notebook table shape, `Step<TAB>Training Loss`: a `nan` cell is the loss, no name."""
    p = tmp_path / "train.log"
    p.write_text("step\tloss\tlr\n" + "".join(f"{s}\t{v}\t0.0001\n" for s, v in _losses(word)))
    _assert_read(read_run(p), value)


@pytest.mark.parametrize("word, value", [("1.#QNAN", math.nan), ("-1.#IND", math.nan), ("1.#INF", math.inf)])
def test_csv_keeps_the_nonfinite_row(tmp_path, word, value):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,lr\n" + "".join(f"{s},{v},0.0001\n" for s, v in _losses(word)))
    _assert_read(read_run(p), value)


@pytest.mark.parametrize("word, value", [("NaN", math.nan), ("nan", math.nan), ("+Inf", math.inf),
                                         ("-Infinity", -math.inf)])
def test_jsonl_with_a_quoted_nonfinite_among_numbers(tmp_path, word, value):
    """Writers whose JSON has no NaN write a string (Jackson's, Go's `+Inf`, a Python str())
    in a column of numbers: the column stays numbers, the row its NaN."""
    p = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "loss": v if v == word else float(v), "lr": 1e-4} for s, v in _losses(word)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _assert_read(read_run(p), value)
