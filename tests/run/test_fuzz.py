"""Fuzzing the readers: whatever the bytes, only our own RunReadError comes out."""

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from writers import record, scalar_event, wandb_history, write_wandb

from postmortem.run import RunReadError, read_run

# CI replays the same examples every time (a red CI means a regression, not a new draw);
# FUZZ_EXAMPLES=5000 on a developer's machine explores further.
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 150)), deadline=None,
                derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

LINE_PIECES = st.sampled_from([
    " iteration 10/ 100 | lm loss: ", "| loss scale: ", "| grad norm: ", "nan", "inf", "-nan",
    "s:12 trl:", " lr:", " norm:", "step:5/10 train_loss:", "iter 3: loss ", ", time 1ms",
    "{'loss': ", "'grad_norm': ", "}", "[Rank 0] step=10, skipped=1, lr=[", "]", "OVERFLOW! Rank 0 ",
    "Attempted loss scale: ", ", reducing to ", "| train_inner | {", '"num_updates": "', '"',
    "1e999", "1,234", "\r", "\n", "|", ":", "=", "\x1b[31m", "[default7]: ", "epoch 001: 1 / 9 loss=",
    "step: 4  loss: ", "step: 1|act_loss: ", "validation loss at iteration 10 | lm loss value: ",
    # the general reader's families
    "Epoch [1][150/5808]\t", "Epoch(train) [3][10/50] ", "Train: [6/100][1000/1251]\t", " (", ")",
    "[step=10/100,epoch=0]\n    train/CrossEntropyLoss=", "53/53 [=====] - 3s - loss: ", "- val_loss: ",
    "Iter 5: Train loss ", "iter 3 step 2: loss ", "completed step: ", "> ", "```\n", "[rank3]:",
    "2024-01-01 10:00:00,123 - mmdet - INFO - ", "Global Step: ", "Loss is ", "Infinity", "NAN",
    "| epoch 001 | ", " batches | ", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to ",
    "overflow detected, setting loss scale to: ", "9/63645 [00:19<37:53:00,  2.14s/it]", "\t", "  ",
])


def read_bytes_as(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        try:
            log = read_run(p)
            assert len(log.frame) >= 1
        except RunReadError:
            pass


@pytest.mark.slow
@FUZZ
@given(st.lists(st.one_of(LINE_PIECES, st.text(max_size=8),
                          st.integers(-10, 10**12).map(str),
                          st.floats(allow_nan=True, allow_infinity=True).map(str)), max_size=120))
def test_text_logs(pieces):
    read_bytes_as("".join(pieces).encode("utf-8", "replace"), "train.log")


@pytest.mark.slow
@FUZZ
# found by this test: a first "record" whose length is absurd left no candidate at all
@example(b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\t\x00\x00\x00", "events.out.tfevents.1.h")
@given(st.binary(max_size=2000), st.sampled_from(["events.out.tfevents.1.h", "x.wandb", "m.parquet",
                                                   "metrics.csv", "metrics.jsonl", "trainer_state.json",
                                                   "mlflow.db", "blob"]))
def test_random_bytes_under_any_name(data, name):
    read_bytes_as(data, name)


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, val in flips:
        if buf:
            buf[pos % len(buf)] = val
    return bytes(buf[:cut] if cut is not None else buf)


EVENTS = b"".join(record(scalar_event(s, "loss", 1.0 / (s + 1))) for s in range(40))
TB_MAGIC_LEN = 12


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.one_of(st.none(), st.integers(0, len(EVENTS))))
def test_mutated_event_files(flips, cut):
    read_bytes_as(_mutate(EVENTS, flips, cut), "events.out.tfevents.1.h")


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.one_of(st.none(), st.integers(0, 4000)))
def test_mutated_wandb_logs(flips, cut):
    with tempfile.TemporaryDirectory() as d:
        p = write_wandb(Path(d) / "r.wandb", [wandb_history(s, {"train/loss": str(s)}) for s in range(60)])
        data = p.read_bytes()
    read_bytes_as(_mutate(data, flips, cut), "run-1/r.wandb")


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
       st.one_of(st.none(), st.integers(0, 3000)))
def test_mutated_trainer_state(flips, cut):
    base = (b'{"global_step": 30, "log_history": ['
            + b",".join(b'{"loss": %d.5, "grad_norm": NaN, "learning_rate": 1e-3, "step": %d}' % (i, i)
                        for i in range(30)) + b"]}")
    read_bytes_as(_mutate(base, flips, cut), "trainer_state.json")


# --- tables: CSV and JSONL of any shape, and trainer_state.json by both of its routes ---------

HEADER_NAMES = st.sampled_from(["step", "epoch", "global_step", "loss", "train/box_loss",
                                "train/cls_loss", "val_loss", "total_loss", "lr", "loss", "",
                                " padded", "café", "grad_norm", "tokens"])
CELLS = st.one_of(st.sampled_from(["", "nan", "NaN", "inf", "-inf", "x", "1,5", "  3 ", "True",
                                   "9007199254740993", "12345678901234567890", "9100000000000",
                                   "-1", "1e999", '"q"']),
                  st.integers(-5, 10**6).map(str), st.floats(allow_nan=True).map(repr))


@pytest.mark.slow
@FUZZ
@given(st.lists(HEADER_NAMES, min_size=1, max_size=6), st.lists(st.lists(CELLS, max_size=7), max_size=30),
       st.booleans(), st.booleans(), st.sampled_from(["metrics.csv", "results.csv", "history.csv"]))
def test_csv_tables(header, rows, bom, final_newline, name):
    text = ",".join(header) + "\n" + "\n".join(",".join(r) for r in rows) + ("\n" if final_newline else "")
    read_bytes_as((b"\xef\xbb\xbf" if bom else b"") + text.encode(), name)


JSON_VALUES = st.one_of(st.integers(-10, 10**20), st.floats(allow_nan=True, allow_infinity=True),
                        st.text(max_size=4), st.none(), st.booleans(),
                        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2),
                                                                             st.integers(), max_size=2))
JSON_ROWS = st.lists(st.dictionaries(st.sampled_from(["step", "epoch", "loss", "train_loss", "grad_norm",
                                                      "eval_loss", "predict_loss", "train_runtime",
                                                      "learning_rate", "remaining_time"]),
                                     JSON_VALUES, max_size=6), max_size=25)


@pytest.mark.slow
@FUZZ
@given(JSON_ROWS, st.one_of(st.none(), st.integers(0, 40)))
def test_jsonl_tables(rows, cut):
    import json
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    read_bytes_as(text[:len(text) - cut] if cut else text, "metrics.jsonl")


@pytest.mark.slow
@FUZZ
@given(JSON_ROWS, st.booleans())
def test_trainer_state_column_wise_and_row_by_row_agree(rows, pretty):
    """Whatever log_history holds, the arrow route reads what the row-by-row route reads."""
    import json

    import postmortem.run.hf as hf
    text = json.dumps({"log_history": rows, "max_steps": 9}, indent=2 if pretty else None)
    outcomes = []
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "trainer_state.json"
        p.write_text(text)
        for arrow_from in (1 << 40, 0):
            hf._ARROW_FROM = arrow_from
            try:
                log = read_run(p)
                outcomes.append((log.frame, log.source.warnings, log.source.extras.get("summary")))
            except RunReadError as err:
                outcomes.append(str(err))
            finally:
                hf._ARROW_FROM = 1 << 20
    rowwise, columns = outcomes
    if isinstance(rowwise, str) or isinstance(columns, str):
        assert rowwise == columns
    else:
        assert columns[0].equals(rowwise[0]) and columns[1:] == rowwise[1:]


# Lines the general reader must read back exactly: a family's shape, random values and steps,
# random surroundings (timestamps, rank prefixes, quote marks, colours).
SHAPES = [
    "iteration {step:8d}/ 100000 | lm loss: {loss:.6E} | grad norm: {gn:.3f} |",
    "step {step} | loss {loss:.6f} | norm {gn:.4f} | lr 3.0e-04",
    "Epoch [0][{step}/1000000]\tlr: 1.000e-02, loss: {loss:.4f}, grad_norm: {gn:.4f}",
    "Train: [0/100][{step}/1000000]\tloss {loss:.4f} ({gn:.4f})\tgrad_norm {gn:.4f} (nan)",
    "{step} | loss {loss:.4f} | lr 1e-4 | grad_norm {gn:.3f}",
    "iter {step}: loss {loss:.4f}, grad_norm {gn:.4f}, time 12.3ms",
]
PREFIXES = ["", "[rank0]: ", "> ", "2024-01-01 10:00:00,123 - root - INFO - ", "\x1b[32m", "[default3]: "]
VALUES = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False) | st.sampled_from([float("nan")])


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(SHAPES), st.sampled_from(PREFIXES),
       st.lists(st.tuples(VALUES, st.floats(min_value=0.01, max_value=1e4)), min_size=3, max_size=40),
       st.integers(0, 10**6))
def test_general_reader_reads_back_what_was_written(shape, prefix, values, first):
    lines = [prefix + shape.format(step=first + i, loss=loss, gn=gn) for i, (loss, gn) in enumerate(values)]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "train.log"
        p.write_text("\n".join(lines) + "\n")
        log = read_run(p)
    f = log.frame
    assert f.step.tolist() == list(range(first, first + len(values)))
    for row, (_loss, gn) in enumerate(values):
        printed = float(lines[row].split("loss")[1].lstrip(": ").split()[0].rstrip(","))
        got = f.loss.iloc[row]
        assert (np.isnan(got) and np.isnan(printed)) or got == printed
        assert log.nan_mask("loss")[row] == np.isnan(printed)
        assert f.grad_norm.iloc[row] == pytest.approx(gn, rel=1e-3, abs=1e-3)
