"""A JSONL file cut inside a line (a run still writing, a copy cut short) is JSONL: its cut
last line is dropped with a warning, and a file with no complete line is a one-line error."""

from pathlib import Path

import pytest
from cli_run import one_line_error, postmortem

from postmortem.run import RunReadError, read_run

SAMPLE = Path(__file__).resolve().parents[2] / "sample_runs" / "long-tail-token" / "metrics.jsonl"


def _cut(tmp_path, size: int, name: str = "trunc.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(SAMPLE.read_bytes()[:size])
    return path


@pytest.mark.slow
def test_cut_inside_its_only_line_is_an_error(tmp_path):
    """`head -c 350 metrics.jsonl`: once read as metric lines, one step, "no incident"."""
    path = _cut(tmp_path, 350)
    assert b"\n" not in path.read_bytes()
    with pytest.raises(RunReadError, match="only line is incomplete"):
        read_run(path)
    line = one_line_error(postmortem("analyze", path))
    assert "only line is incomplete" in line


@pytest.mark.parametrize("name,line", [
    ("metrics.log", b'{"step": 0, "loss": 10.9, "lr": 0.0'),               # by its step key
    ("scalars.jsonl", b'{"lr": 0.001, "data_time": 0.0089, "loss": 5.02'),  # by its name
])
def test_a_cut_record_of_any_name_is_jsonl(tmp_path, name, line):
    path = tmp_path / name
    path.write_bytes(line)
    with pytest.raises(RunReadError, match="only line is incomplete"):
        read_run(path)


def test_cut_inside_a_later_line_drops_that_line(tmp_path):
    data = SAMPLE.read_bytes()
    second = data.index(b"\n") + 1
    path = _cut(tmp_path, (second + data.index(b"\n", second)) // 2)     # half the second line
    log = read_run(path)
    assert log.source.format == "jsonl" and log.frame.step.tolist() == [0]
    assert any("last line is incomplete" in w for w in log.source.warnings)
