"""A command line that explains itself: every command described with examples that parse, the
format names from the readers, the checklists in words, plain lines in a pipe, and --json
wherever a script would want it (one JSON document on stdout, nothing else)."""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import assert_one_line_error

from postmortem.cli import main
from postmortem.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}
NO_JSON = {"tui": "the dashboard is interactive; `analyze --json` is its script form"}


def _subparsers():
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))


def commands() -> dict[str, argparse.ArgumentParser]:
    return dict(_subparsers().choices)


def piped(*args, cwd=None, columns="80"):
    """The real command with stdout a pipe in an 80-column terminal's environment."""
    env = {**os.environ, **IDENTITY, "COLUMNS": columns}
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


# --- --help --------------------------------------------------------------------------

def test_the_top_level_help_lists_every_command_on_one_line_and_a_typical_session():
    r = piped("--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    helps = {a.dest: a.help for a in _subparsers()._choices_actions}
    assert sorted(helps) == sorted(commands())
    for name, help_text in helps.items():
        [line] = [ln for ln in lines if ln.split()[:1] == [name]]
        assert line.split(None, 1)[1] == help_text, (name, line)     # the whole help on its one line
    session = r.stdout[r.stdout.index("a typical session:"):]
    for name in ("analyze", "tui", "new", "check", "commit", "lessons"):
        assert f"postmortem {name} " in session


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_a_description_and_examples_that_parse(name):
    parser = commands()[name]
    assert parser.description and len(parser.description) > 30, name
    assert parser.epilog and parser.epilog.startswith("examples:"), name
    examples = [ln.strip() for ln in parser.epilog.splitlines()[1:] if ln.strip()]
    assert 1 <= len(examples) <= 4, name
    for example in examples:
        words = shlex.split(example.split(" | ")[0].split(" > ")[0], comments=True)
        assert words[0] == "postmortem", example
        if words[1] != name:             # `postmortem RUN`: the dashboard's short form
            assert name == "tui" and words[1:2] == ["runs/r17"], example
            continue
        args = build_parser().parse_args(words[1:])       # an example the parser refuses exits here
        assert args.func is not None and args.command == name
    every_option = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert all(a.help for a in every_option), [a.dest for a in every_option if not a.help]


@pytest.mark.slow
def test_format_lists_the_reader_registrys_names_in_help_and_in_the_error(capsys):
    from postmortem.run.readers import formats
    FORMATS = formats()
    for name in ("info", "analyze", "new", "replay"):
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert ", ".join(FORMATS) in text, name
    r = piped("info", SAMPLE, "--format", "excel")
    assert_one_line_error(r, "unknown format 'excel'", *FORMATS)


@pytest.mark.slow
def test_a_command_line_argparse_refuses_is_one_line_naming_the_command_and_its_help(tmp_path):
    assert_one_line_error(piped("new", SAMPLE, "--step", "x"), "new: ", "--step", "`postmortem new --help`")
    # --learner is a setting now (kb/settings.py): its absence is said with where to set it once
    assert_one_line_error(piped("new", SAMPLE), "--learner NAME, or once for all: postmortem init --learner NAME")
    assert_one_line_error(piped("analyze", SAMPLE, "--top", "3"),
                          "analyze: unrecognized arguments: --top 3", "`postmortem analyze --help`")
    assert_one_line_error(piped("analyse", SAMPLE), "analyse: no such command or file",
                          "did you mean `postmortem analyze`?")
    assert_one_line_error(piped("lesons", cwd=tmp_path), "did you mean `postmortem lessons`?")
    # a run whose name looks like a command is still read as a run
    run = tmp_path / "analyse"
    run.mkdir()
    for name in ("metrics.jsonl", "manifest.json"):
        shutil.copy(SAMPLE / name, run / name)
    r = piped("analyse", cwd=tmp_path)
    assert r.returncode == 0 and "19-spike-001" in r.stdout, r.stderr


def test_parsing_a_command_does_not_import_the_readers():
    code = ("import sys; from postmortem.cli.parser import build_parser; "
            "build_parser().parse_args(['lessons', '--json']); "
            "print('postmortem.run.discover' in sys.modules, 'pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.split() == ["False", "False"], r.stderr


# --- the checklists in words ----------------------------------------------------------

def test_every_check_of_the_trees_has_a_name_in_words():
    from postmortem.cli.report import CHECK_NAMES, CHECKLISTS
    from postmortem.diagnose.trees import TREE_A, TREE_B
    ids = [n.id for n in (*TREE_A, *TREE_B)]
    assert sorted(CHECK_NAMES) == sorted(ids)
    assert {i[0] for i in ids} == set(CHECKLISTS)
    assert all(len(name.split()) <= 7 and "," not in name for name in CHECK_NAMES.values())


@pytest.mark.slow
def test_the_analysis_says_the_checklist_path_in_words():
    r = piped("analyze", SAMPLE)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "checklist A, did the run start right: all 10 checks ok" in out
    assert "checklist B, how it trained: 2 found a problem, 4 ok, 5 skipped" in out
    found = [ln.strip() for ln in out if ln.strip().startswith("found ")]
    assert found == ["found B2 loss spike, points to long-tail-token: 1 spike(s): step 250 (1.302 -> 5.157)",
                     "found B2.2 grad-norm spike, points to long-tail-token: 1 grad-norm spike(s): step 250 (15x)"]
    ok = next(ln for ln in out if ln.strip().startswith("ok: "))
    assert "B1 NaN or Inf" in ok and "B4 slow divergence" in ok
    assert "A1ok" not in r.stdout and "B2x->" not in r.stdout


# --- plain lines in a pipe --------------------------------------------------------------

@pytest.fixture
def long_named_run(tmp_path):
    """A run in a deep folder with long names, its metric names longer than a table column."""
    run = tmp_path / ("a-training-run-of-the-big-model-" * 3 + "seed-1234") / "attempt-with-a-long-name"
    run.mkdir(parents=True)
    long_metric = "grad_norm/transformer.h.11.attention.query_key_value.weight"
    rows = [{"step": s, "loss": 2.0 - s / 1000, "grad_norm": 1.0, long_metric: 0.5} for s in range(300)]
    rows[250]["loss"] = 6.0
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run, long_metric


@pytest.mark.slow
def test_info_in_a_pipe_keeps_paths_and_names_whole(long_named_run):
    run, long_metric = long_named_run
    r = piped("info", run)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.strip() == str(run / "metrics.jsonl") for ln in lines), r.stdout
    [row] = [ln for ln in lines if long_metric in ln]
    assert row.split()[:2] == [long_metric, "300"]         # the name whole, its row on one line
    assert "…" not in r.stdout and "\x1b[" not in r.stdout
    assert all(ln == ln.rstrip() for ln in lines)


@pytest.mark.slow
def test_the_analysis_in_a_pipe_does_not_wrap_at_80_columns(long_named_run, capsys):
    run, _ = long_named_run
    narrow, wide = piped("analyze", run, columns="80"), piped("analyze", run, columns="400")
    assert narrow.returncode == 0, narrow.stderr
    assert narrow.stdout == wide.stdout                   # the terminal's width plays no part
    lines = [ln.strip() for ln in narrow.stdout.splitlines()]
    assert max(map(len, lines)) > 80
    question = "Is there a loss spike (7 x the noise and 10% over the mean of the previous 100 steps)?"
    assert question in lines
    analysis = one_json(capsys, "analyze", run, "--json")
    top = analysis["incidents"][0]["hypotheses"][0]
    assert len(top["discriminate"]) > 80 and f"next: {top['discriminate']}" in lines
    for o in top["supported_by"][:3]:
        assert f"+ [{o['panel']}] {o['observation']}" in lines


# (in a terminal the same analysis fits 100 columns: tests/diagnose/test_diagnose.py)


# --- --json everywhere ---------------------------------------------------------------------

def test_every_command_that_prints_a_result_takes_json():
    for name, parser in commands().items():
        has = any("--json" in a.option_strings for a in parser._actions)
        assert has != (name in NO_JSON), name


def one_json(capsys, *argv, code=0):
    """Run the command in-process: its stdout is exactly one JSON document."""
    assert main([str(a) for a in argv]) == code
    out = capsys.readouterr().out
    return json.loads(out)


def test_json_of_the_run_commands(capsys, tmp_path):
    info = one_json(capsys, "info", SAMPLE, "--json")
    assert info["run"]["id"] == "19-spike-001" and info["steps"]["rows"] == 400
    analysis = one_json(capsys, "analyze", SAMPLE, "--json", "--set", "spike_sigma=6")
    assert analysis["incidents"][0]["step"] == 250
    out = tmp_path / "clean.csv"
    export = one_json(capsys, "export", SAMPLE, "-o", out, "--json")
    assert export["wrote"] == str(out) and export["rows"] == 400 and "loss" in export["metrics"]
    assert "\"loss\"" in out.read_text().splitlines()[0].split(",")
    samples = one_json(capsys, "sample", "list", "--json")
    assert {s["name"] for s in samples} >= {"healthy", "long-tail-token"}
    assert all(s["what"] for s in samples)


@pytest.mark.slow
def test_json_of_the_postmortem_commands(capsys, tmp_path, monkeypatch):
    import git
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    draft = tmp_path / "draft.md"
    new = one_json(capsys, "new", SAMPLE, "--learner", "ada", "-o", draft, "--json")
    assert new["wrote"] == str(draft) and new["step"] == 250 and draft.is_file()
    assert new["figure"] is None or Path(new["figure"]).is_file()
    assert new["hypotheses"][0] == "long-tail-token"
    unfinished = one_json(capsys, "check", draft, "--json", code=1)
    assert unfinished["ok"] is False and unfinished["problems"]
    refused = one_json(capsys, "commit", draft, "--learner", "ada", "--repo", kb, "--json", code=1)
    assert refused["committed"] is False and refused["problems"] == unfinished["problems"]
    doc = tmp_path / EXAMPLE.name
    for beside in EXAMPLE.parent.glob(EXAMPLE.stem + ".*"):      # the document and its figure
        shutil.copy(beside, tmp_path / beside.name)
    assert one_json(capsys, "check", doc, "--json") == {"ok": True, "problems": [],   # the numbers checked too
                                                        "run": str(SAMPLE), "run_in_store": None}
    done = one_json(capsys, "commit", doc, "--learner", "example", "--repo", kb, "--json")
    assert done["committed"] is True and len(done["sha"]) == 40
    assert git.Repo(kb).head.commit.hexsha == done["sha"]
    assert Path(done["postmortem"]).name == EXAMPLE.name
    lessons = one_json(capsys, "lessons", "--repo", kb, "--json")
    assert lessons["count"] == 1 and lessons["patterns"][0]["pattern"] == "long-tail-token"
    assert one_json(capsys, "similar", SAMPLE, "--repo", kb, "--json") == []    # its own write-up left out
    twin = tmp_path / "twin"                       # the same incident under another run id
    shutil.copytree(SAMPLE, twin)
    manifest = json.loads((twin / "manifest.json").read_text())
    (twin / "manifest.json").write_text(json.dumps({**manifest, "run_id": "19-spike-twin"}))
    similar = one_json(capsys, "similar", twin, "--repo", kb, "--json")
    assert similar[0]["run_id"] == "19-spike-001"
    assert set(similar[0]) == {"score", "postmortem", "run_id", "pattern", "why"}
    verified = one_json(capsys, "verify", doc, "--run", SAMPLE, "--baseline", SAMPLE, "--json", code=1)
    said = {o["expectation"]: o for o in verified["outcomes"]}
    assert verified["ok"] is False and said["step 250 loss < 2.0"]["ok"] is False    # the spike is there
    assert said["step 250 loss < 2.0"]["measured"].startswith("loss = 5.15")


@pytest.mark.slow
def test_json_of_a_replay_is_alone_on_stdout():
    pytest.importorskip("torch")
    r = piped("replay", SAMPLE, "--arms", "faithful", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["incident_step"] == 250 and result["faithful"] is True
