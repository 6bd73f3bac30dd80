"""What a new user's walk through the command line found, each held by a test on real files,
real git repositories in tmp_path and the real CLI."""

from pathlib import Path

from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"


def test_a_missing_post_mortem_is_named_once(tmp_path):
    missing = tmp_path / "nonexistent.md"
    line = one_line_error(postmortem("check", missing))
    assert line == f"postmortem: error: {missing}: No such file or directory"
