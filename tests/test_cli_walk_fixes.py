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


def test_every_command_that_takes_a_learner_refuses_a_path_the_same_way(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("not read: the name is refused first\n")
    said = {command: one_line_error(postmortem(*args, "--learner", "../x"))
            for command, args in {"new": ("new", SAMPLE), "commit": ("commit", doc),
                                  "lessons": ("lessons", "--repo", tmp_path)}.items()}
    assert len(set(said.values())) == 1, said
    assert "learner name '../x' is not a plain name" in said["lessons"]


def test_export_refuses_a_missing_folder_and_an_existing_file_without_force(tmp_path):
    nowhere = tmp_path / "no" / "dir" / "o.csv"
    line = one_line_error(postmortem("export", SAMPLE, "-o", nowhere))
    assert line == f"postmortem: error: cannot write {nowhere}: the folder {nowhere.parent} does not exist"
    assert not (tmp_path / "no").exists()                       # not made on the way
    out = tmp_path / "o.csv"
    out.write_text("mine\n")
    assert one_line_error(postmortem("export", SAMPLE, "-o", out)).endswith(f"{out}: exists; --force overwrites it")
    assert out.read_text() == "mine\n"
    r = postmortem("export", SAMPLE, "-o", out, "--force")
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("segment,step") or "loss" in out.read_text().splitlines()[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv"]      # no temporary left beside it
