"""No text reader is worse than linear in a line's length: a 1 MB or a 200 MB line of letters,
digits, blanks or repeated tokens is read in seconds, and the metric lines around it are read."""

import json
import subprocess
import sys
import time

import pytest
from test_cli import pm

from postmortem.run.metriclines import clean, code, pairs

# Shapes that made a regex try every split of a run (code's method-call test on a word,
# the logger prefix's `\s*\|?\s*` on blanks) or a list scan per number (fractions).
SHAPES = ["Average Precision  (AP) @[ ", "a", "7", "a1", "a ", "7 ", "  ", "\t", "1/2 ", "(1 ", "a.b", "a.(",
          "f(a=", "{'loss': ",
          "loss: 1.0 ", "nan ", "x=1 ", "[rank0]: ", "| ", "'a': ", "Epoch [1][", "eta: ", "INFO "]


def _timed(fn, text: str) -> float:
    t = time.perf_counter()
    fn(text)
    return time.perf_counter() - t


@pytest.mark.slow
@pytest.mark.parametrize("unit", SHAPES)
def test_line_readers_are_linear(unit):
    # 100 KB: a quadratic reader needs a minute here (the code test took 60 s on 100 KB)
    text = "x" + unit * (100_000 // len(unit)) + "y"
    assert len(text) <= pairs.LONGEST_LINE            # parsed, not skipped as a blob
    for fn in (code.is_code, clean.clean, pairs.parse):
        assert _timed(fn, text) < 5.0, (fn.__name__, unit)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["a", "7", "a1", " "])
def test_code_and_prefix_tests_on_a_1mb_line(unit):
    text = "q" + unit * (1 << 20) + "z"
    assert _timed(code.is_code, text) < 5.0
    assert _timed(clean.clean, text) < 5.0


def _log_around(line: str) -> str:
    steps = "".join(f"step {i} | loss {3.0 - i / 100:.4f} | lr 0.0001\n" for i in range(1, 41))
    more = "".join(f"step {i} | loss {3.0 - i / 100:.4f} | lr 0.0001\n" for i in range(41, 81))
    return steps + line + "\n" + more


def _info_in_time(path, limit: float) -> dict:
    t = time.perf_counter()
    r = pm("info", path, "--json")
    assert time.perf_counter() - t < limit
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["a", "7", "a1", "nan ", "1/2 ", " "])
def test_a_1mb_line_in_a_text_log(tmp_path, unit):
    p = tmp_path / "train.log"
    p.write_text(_log_around("z" + unit * ((1 << 20) // len(unit)) + "z"))
    data = _info_in_time(p, 60)
    loss = next(m for m in data["metrics"] if m["name"] == "loss")
    assert loss["count"] == 80 and loss["max"] == pytest.approx(2.99) and loss["min"] == pytest.approx(2.2)
    assert data["steps"] == {"rows": 80, "first": 1, "last": 80}


@pytest.mark.slow
@pytest.mark.parametrize("unit", [b"a", b"7"])
def test_a_200mb_line_in_a_text_log(tmp_path, unit):
    p = tmp_path / "train.log"
    with open(p, "wb") as f:
        f.write(_log_around("").split("\n\n")[0].encode() + b"\n")
        f.write(unit * (200 << 20) + b"\n")
        f.write(b"step 41 | loss 2.5900 | lr 0.0001\n")
    r = subprocess.run([sys.executable, "-m", "postmortem", "info", str(p), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["steps"] == {"rows": 41, "first": 1, "last": 41}


@pytest.mark.slow
def test_utf16_trainer_state_is_read_as_a_trainer_state(tmp_path):
    # what PowerShell's `>` writes: UTF-16 with a byte-order mark
    state = {"global_step": 30, "log_history": [{"step": s, "loss": 2.0 - s / 100, "learning_rate": 1e-4,
                                                 "epoch": s / 30} for s in (10, 20, 30)]}
    p = tmp_path / "trainer_state.json"
    p.write_bytes(json.dumps(state, indent=2).encode("utf-16"))
    data = _info_in_time(p, 60)
    assert data["run"]["format"] == "hf-trainer-state"
    assert data["steps"] == {"rows": 3, "first": 10, "last": 30} and len(data["segments"]) == 1


@pytest.mark.slow
def test_a_byte_that_is_not_utf8_in_a_jsonl_key(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9, "n\xff": 0.1}\n{"step": 3, "loss": 1.8}\n')
    data = _info_in_time(p, 60)
    assert data["steps"] == {"rows": 3, "first": 1, "last": 3}
    assert any("not UTF-8" in w and "line 2" in w for w in data["warnings"])


@pytest.mark.slow
def test_carriage_return_line_endings(tmp_path):
    p = tmp_path / "train.log"
    p.write_bytes("".join(f"step {i} | loss {3 - i / 10:.2f}\r" for i in range(1, 6)).encode())
    data = _info_in_time(p, 60)
    assert data["steps"] == {"rows": 5, "first": 1, "last": 5}


@pytest.mark.slow
def test_a_binary_blob_inside_a_text_log(tmp_path):
    p = tmp_path / "train.log"
    blob = bytes(range(256)) * 12            # NULs, control bytes, bytes that are not UTF-8
    p.write_bytes(b"step 1 | loss 2.0\nstep 2 | loss 1.9\n" + blob + b"\nstep 3 | loss 1.8\nstep 4 | loss 1.7\n")
    data = _info_in_time(p, 60)
    assert data["steps"] == {"rows": 4, "first": 1, "last": 4}
    assert [m["name"] for m in data["metrics"]] == ["loss"]
    assert any("binary bytes" in w for w in data["warnings"])


def test_catalogue_patterns_are_linear():
    # each entry's pattern on a 100 KB line of one piece of its own example repeated without
    # the rest (a `.*` after a repeated literal made detectron2's take 5 s at 80 KB)
    from postmortem.run.dialects import catalogue
    for d in catalogue():
        example = d.examples[0]
        for start in range(0, len(example), 6):
            unit = example[start:start + 20] + " x "
            text = unit * (100_000 // len(unit))
            assert _timed(d.search, text) < 2.0, (d.id, unit)


def test_megatron_argument_line_with_a_long_run_of_blanks():
    from postmortem.run import textlogs
    line = "  lr ...... 0.1" + " " * 200_000 + "x  "
    assert _timed(textlogs.MEGATRON_ARG.match, line) < 1.0      # was ~20 s at 100 KB
    assert textlogs.MEGATRON_ARG.match("  lr ........ 0.0003   ").groups() == ("lr", "0.0003")


def test_argument_dump_reader_with_a_long_run_of_blanks(tmp_path):
    from postmortem.run import logconfig
    line = "  lr ...... 0.1" + " " * 200_000 + "x  "
    assert _timed(lambda t: list(logconfig._DUMP.finditer(t)), line) < 1.0      # was ~2 s at 20 KB


# Runs that made a catalogue pattern try every split (an optional `\S+\.py:\d+: ` prefix on a run
# with no blank, an unbounded lazy bar on a run of blanks), behind each entry's own keyword
CATALOGUE_SHAPES = [" ", "7", "=", "/", "a", "1.", "x.py:1", "[=", "1/2 ["]


@pytest.mark.slow
@pytest.mark.parametrize("unit", CATALOGUE_SHAPES)
def test_catalogue_patterns_on_runs_behind_their_keyword_are_linear(unit):
    from postmortem.run.dialects import catalogue
    from postmortem.run.metriclines.pairs import _BAR_RATE, _CIFAR_BAR
    for d in catalogue():
        head = d.keywords[0] if d.keywords else ""
        text = head + " " + unit * (100_000 // len(unit)) + " " + head
        assert _timed(d.pattern.search, text) < 5.0, (d.id, unit)
    for pattern in (_BAR_RATE, _CIFAR_BAR):
        assert _timed(pattern.search, "[" + unit * (100_000 // len(unit))) < 5.0, (pattern.pattern, unit)
