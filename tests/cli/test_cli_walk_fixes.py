"""What a new user's walk through the command line found, each held by a test on real files,
real git repositories in tmp_path and the real CLI."""

import re
from pathlib import Path

import pytest
from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"


def test_a_missing_post_mortem_is_named_once(tmp_path):
    missing = tmp_path / "nonexistent.md"
    line = one_line_error(postmortem("check", missing))
    assert line == f"postmortem: error: {missing}: No such file or directory"


@pytest.mark.slow
def test_every_command_that_takes_a_learner_refuses_a_path_the_same_way(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("not read: the name is refused first\n")
    said = {command: one_line_error(postmortem(*args, "--learner", "../x"))
            for command, args in {"new": ("new", SAMPLE), "commit": ("commit", doc),
                                  "lessons": ("lessons", "--repo", tmp_path)}.items()}
    assert len(set(said.values())) == 1, said
    assert "learner name '../x' is not a plain name" in said["lessons"]


@pytest.mark.slow
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
    assert '"loss"' in out.read_text().splitlines()[0].split(",")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv"]      # no temporary left beside it


@pytest.mark.slow
def test_new_takes_the_incident_nearest_the_step_and_says_so(tmp_path):
    out = tmp_path / "d.md"
    r = postmortem("new", SAMPLE, "--learner", "ada", "--step", "400", "-o", out)
    assert r.returncode == 0, r.stderr
    assert ("postmortem: no incident at step 400; took the nearest, the spike at step 250 "
            "(incidents at 250)") in r.stderr
    assert "spike_step: 250" in out.read_text()
    exact = postmortem("new", SAMPLE, "--learner", "ada", "--step", "250", "-o", tmp_path / "e.md")
    assert exact.returncode == 0 and "nearest" not in exact.stderr


@pytest.mark.slow
def test_the_incidents_listed_are_all_counted(real_runs, tmp_path):
    """modded-nanogpt-muon has ten incidents: the two past the eighth are said, not dropped."""
    r = postmortem("new", real_runs / "modded-nanogpt-muon", "--learner", "ada", "--step", "4000",
                   "-o", tmp_path / "m.md")
    assert r.returncode == 0, r.stderr
    assert "took the nearest, the spike at step 3473" in r.stderr
    assert "5335 and 2 more)" in r.stderr


@pytest.mark.slow
def test_replay_takes_the_incident_nearest_the_step_and_says_so():
    r = postmortem("replay", SAMPLE, "--step", "400", "--arms", "faithful", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert "postmortem: no incident at step 400; took the nearest, the spike at step 250" in r.stderr
    assert "spike at step 250, replayed from checkpoint 200" in r.stdout


def test_a_list_cut_short_says_how_many_more():
    from postmortem.document.lint import listed
    assert listed(list(range(10)), 8) == "0, 1, 2, 3, 4, 5, 6, 7 and 2 more"
    assert listed([919, 947]) == "919, 947" and listed([]) == ""


def test_commit_refuses_a_draft_of_another_learner(tmp_path):
    import git
    from worked_example import as_learners
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    doc = as_learners(tmp_path / "drafts", "ada")
    line = one_line_error(postmortem("commit", doc, "--learner", "bob", "--repo", kb))
    assert line == (f"postmortem: error: {doc}: the draft belongs to ada (front matter `learner: ada`); "
                    "commit it with --learner ada, or change `learner:` in it to bob")
    assert not (kb / "learners").exists()


IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}
HEALTHY = ROOT / "sample_runs" / "healthy"


def postmortem_in(cwd: Path, *args):
    """The real command run from `cwd`, as a user in another folder runs it."""
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, **IDENTITY}, timeout=600)


def knowledge_base(tmp_path: Path) -> Path:
    """A git repository holding a copy of the sample run (its log and manifest) as `run`."""
    import shutil

    import git
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    shutil.copytree(SAMPLE, kb / "run", ignore=shutil.ignore_patterns("checkpoints"))
    return kb


@pytest.mark.slow
def test_verify_finds_the_run_from_another_folder_and_says_where_it_looked(tmp_path):
    kb, elsewhere = knowledge_base(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert postmortem_in(kb, "new", "run", "--learner", "ada", "-o", "d.md").returncode == 0
    doc = kb / "d.md"
    assert "\nrun: run\n" in doc.read_text()         # relative to the repository: it travels with it
    doc.write_text(doc.read_text().replace("- TODO: seed, epsilon, through step T, and expectations.",
                                           "- seed: 1234\n- epsilon: 0.0\n- through step: 200"))
    r = postmortem_in(elsewhere, "verify", doc, "--run", HEALTHY)
    assert r.returncode == 0 and r.stdout.startswith("pass  loss within 0 of the baseline"), r.stdout + r.stderr
    (kb / "run").rename(kb / "moved")
    r = postmortem_in(elsewhere, "verify", doc, "--run", HEALTHY)
    assert r.returncode == 1
    assert f"no baseline run: front matter `run: run` is not at {kb / 'run'}, {elsewhere / 'run'}" in r.stdout


@pytest.mark.slow
def test_commit_keeps_the_run_relative_to_the_knowledge_base(tmp_path):
    from worked_example import as_learners
    kb = knowledge_base(tmp_path)
    draft = as_learners(tmp_path / "drafts")                 # written outside the repository
    draft.write_text(re.sub(r"\nrun: .*\n", f"\nrun: {kb / 'run'}\n", draft.read_text(), count=1))
    r = postmortem_in(tmp_path, "commit", draft, "--learner", "ada", "--repo", kb)
    assert r.returncode == 0, r.stderr
    committed = kb / "learners" / "ada" / "postmortems" / draft.name
    assert "\nrun: run\n" in committed.read_text()
    r = postmortem_in(tmp_path / "drafts", "verify", committed, "--run", HEALTHY)
    assert r.returncode == 0 and "no baseline" not in r.stdout, r.stdout


def _problems(doc: Path) -> list[str]:
    r = postmortem("check", doc)
    assert r.returncode == 1, r.stderr
    return r.stdout.splitlines()


@pytest.mark.slow
def test_a_run_known_to_be_fp32_rules_out_fp16_overflow_in_the_draft(tmp_path):
    doc = tmp_path / "d.md"
    assert postmortem("new", SAMPLE, "--learner", "ada", "-o", doc).returncode == 0
    assert ("| loss | the run is fp32 (manifest.json says so): no fp16 loss scale to overflow |  "
            "| fp16-overflow |") in doc.read_text()
    assert not [p for p in _problems(doc) if "fp16-overflow" in p]


@pytest.mark.slow
def test_an_unknown_dtype_rules_nothing_out(tmp_path):
    table = tmp_path / "run.csv"                 # the same steps, without the manifest's dtype
    assert postmortem("export", SAMPLE, "-o", table).returncode == 0
    doc = tmp_path / "d.md"
    assert postmortem("new", table, "--learner", "ada", "-o", doc).returncode == 0
    assert "no fp16 loss scale" not in doc.read_text()


@pytest.mark.slow
def test_check_shows_how_to_dismiss_and_the_form_it_shows_is_taken(tmp_path):
    doc = tmp_path / "d.md"
    assert postmortem("new", SAMPLE, "--learner", "ada", "-o", doc).returncode == 0
    said = [p for p in _problems(doc) if "nothing rules out lr-discontinuity" in p]
    assert len(said) == 1 and "`3. ~~**lr-discontinuity**~~ [lr] ... (dismissed: the reason)`" in said[0]
    form = said[0].split("`")[-2]
    line = next(x for x in doc.read_text().splitlines() if x.startswith("3. **lr-discontinuity**"))
    written = form.replace("...", line.split("] ", 1)[1]).replace("the reason", "the LR is smooth there")
    doc.write_text(doc.read_text().replace(line, written))
    assert not [p for p in _problems(doc) if "lr-discontinuity" in p]


def test_the_readme_shows_the_markdown_forms_check_reads():
    """The headless way to argue (a row under `rules out`, a dismissal) is in the README, in
    the form the parser takes."""
    import re

    from postmortem.document.markdown import _HYP
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```markdown\n(.*?)```", readme, re.S)[1]
    dismissed = [m for line in block.splitlines() if (m := _HYP.match(line.split(". ", 1)[-1])) and m["why"]]
    assert dismissed and "| panel | observation | favors | rules out |" in block
    assert "(dismissed:" in readme and "`d`" in readme


def _readme() -> str:
    """The README with its line breaks as spaces (a claim may wrap)."""
    return " ".join((ROOT / "README.md").read_text().split())


def test_the_readme_says_the_spike_thresholds_the_code_uses():
    from postmortem.diagnose.thresholds import Thresholds
    th, readme = Thresholds(), _readme()
    assert "mean + 3 std" not in readme
    assert (f"a loss {th.spike_sigma:g} times the noise above the mean of the {th.spike_window} steps "
            "before it") in readme
    assert f"at least {th.spike_min_rise:.0%} above that mean" in readme
    assert f"recovery to mean + {th.recovery_sigma:g} std within {th.recovery_window} steps" in readme


def test_the_readme_says_what_the_sample_manifests_record():
    import json
    readme = _readme()
    recorded = {k for m in (ROOT / "sample_runs").glob("*/manifest.json")
                for k in json.loads(m.read_text())["versions"]}
    if "cpu_capability" not in recorded:           # the replay cannot be held to 1e-5 on them
        reason = "the manifest does not say which CPU kernels recorded the run"
        assert reason in (ROOT / "postmortem" / "replay" / "engine.py").read_text()
        assert f"(`within 0.01: {reason}`)" in readme
        assert "0.0 for the sample runs" not in readme


def test_the_samples_first_analysis_has_no_warning_about_its_own_files():
    """The first thing a newcomer reads: the run's record, manifest and the lab's minigpt.json
    are one run, not a choice to warn about."""
    r = postmortem("analyze", SAMPLE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("19-spike-001  jsonl  400 steps") and not lines[1].startswith("warning"), lines[:3]
    assert "minigpt.json" not in r.stdout and "postmortem record" not in r.stdout


@pytest.mark.slow
def test_the_symptoms_of_a_grad_norm_peak_show_the_loss_logged_at_that_step():
    """bad-data's incident is a grad-norm spike: its Symptoms give the loss at the peak step."""
    import json
    r = postmortem("analyze", ROOT / "sample_runs" / "bad-data", "--json")
    (inc,) = [i for i in json.loads(r.stdout)["incidents"] if i["metric"] == "grad_norm"]
    rows = [json.loads(line) for line in (ROOT / "sample_runs" / "bad-data" / "metrics.jsonl").open()]
    logged = next(row["loss"] for row in rows if row["step"] == inc["symptoms"]["peak_step"] and "loss" in row)
    assert inc["symptoms"]["peak_loss"] == pytest.approx(logged)
