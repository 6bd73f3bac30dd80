"""A post-mortem of a run that lives inside a store of several runs (a TensorBoard logdir written
by TensorBoard's writer, an mlflow.db written by MLflow's client) names the store and the run's
id in it (`run_in_store`), so that `check` (numbers compared by default, from another folder),
`commit` into a knowledge base of its own and `verify` read that run again, not the store's
listing; two runs of one store never share a document's or a draft's name; a store that no
longer holds the run is one line naming the store, the id and the runs it holds."""

import math
import random

import git
import pytest
from test_stores_frameworks import tb_write

from postmortem.cli.parser import main
from postmortem.diagnose.models import Evidence
from postmortem.document.markdown import read, render
from postmortem.document.model import Expectation, Verification


def losses(spike: int, steps: int = 300, seed: int = 0) -> list[float]:
    """A loss that falls smoothly, four times higher for three steps from `spike`."""
    rng = random.Random(seed)
    return [(3 * math.exp(-s / 200) + 1 + rng.gauss(0, 0.02)) * (4 if spike <= s < spike + 3 else 1)
            for s in range(steps)]


def filled(path, expect_below: float) -> None:
    """Sections 3-7 written as an author would (every hypothesis argued), the Verification with
    an expectation and the epsilon comparison with the document's own run (the baseline)."""
    pm = read(path)
    patterns = [h.pattern for h in pm.hypotheses]
    pm.evidence = [Evidence(panel="loss", observation="four times the loss for three steps, then back",
                            favors=patterns[:1], rules_out=patterns[1:])]
    pm.root_cause = "one batch of rare tokens"
    pm.remediation = ["filter the shard of rare tokens"]
    pm.verification = Verification(seed=0, epsilon=0.0, through_step=pm.spike_step + 10, expectations=[
        Expectation(text=f"max loss in [{pm.spike_step}, {pm.spike_step + 5}] < {expect_below}")])
    pm.lesson = "a spike of three steps on a smooth LR: look at the batch first"
    path.write_text(render(pm))


def cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def front(path) -> dict:
    import yaml
    return yaml.safe_load(path.read_text().split("---\n")[1])


@pytest.fixture
def places(tmp_path, monkeypatch):
    """(the drafts' folder, a knowledge base that is a repository of its own, the folder the
    commands are typed in after `new`: none inside another)."""
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    for env in ("GIT_AUTHOR", "GIT_COMMITTER"):
        monkeypatch.setenv(f"{env}_NAME", "Ada")
        monkeypatch.setenv(f"{env}_EMAIL", "ada@example.invalid")
    (tmp_path / "drafts").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "drafts")
    return tmp_path / "drafts", kb, tmp_path / "elsewhere"


def new_check_commit_verify(capsys, monkeypatch, store, run, places, peak: str) -> None:
    """`new STORE --run ID` -> `check` (from another folder, no --run, a wrong number caught)
    -> `commit` into the knowledge base -> `verify` with the document's run as the baseline."""
    drafts, kb, elsewhere = places
    code, out, err = cli(capsys, "new", store, "--run", run, "--learner", "ada", "--json")
    assert code == 0, err
    import json
    wrote = drafts / json.loads(out)["wrote"]
    said = front(wrote)
    assert said["run"] == str(store) and said["run_in_store"] == json.loads(out)["run_in_store"]
    filled(wrote, expect_below=50)
    monkeypatch.chdir(elsewhere)
    code, out, _ = cli(capsys, "check", wrote)
    assert code == 0, out
    assert out.strip() == f"{wrote}: complete and true to the run {store} --run {said['run_in_store']}"
    text = wrote.read_text()
    assert f"| peak_loss | {peak} |" in text, text
    wrote.write_text(text.replace(f"| peak_loss | {peak} |", "| peak_loss | 99.5 |"))
    code, out, _ = cli(capsys, "check", wrote)
    assert code == 1 and out.strip() == f"Symptoms: peak_loss is 99.5 but the run says {peak}"
    code, out, err = cli(capsys, "commit", wrote, "--kb", kb)
    assert code == 1 and "not committed" in err
    wrote.write_text(text)
    code, out, err = cli(capsys, "commit", wrote, "--kb", kb)
    assert code == 0, out + err
    committed = kb / "learners" / "ada" / "postmortems" / wrote.name
    assert front(committed)["run_in_store"] == said["run_in_store"] and "numbers" not in front(committed)
    assert git.Repo(kb).head.commit.message.startswith("post-mortem")
    # verify: the re-run named in the store, the baseline read from the front matter by its id
    code, out, err = cli(capsys, "verify", committed, "--run", store, "--run-id", said["run_in_store"])
    assert code == 0 and out.startswith("pass  loss within 0 of the baseline") and "FAIL" not in out, out + err
    # the store no longer holds the run: one line naming the store, the id and what is there
    gone = wrote.read_text().replace(f"run_in_store: {said['run_in_store']}", "run_in_store: gone-run")
    wrote.write_text(gone)
    code, out, _ = cli(capsys, "check", wrote)
    assert code == 1 and len(out.strip().splitlines()) == 1
    assert f"{store}: holds no run `gone-run`" in out and "it holds:" in out, out


def test_a_tensorboard_logdir_of_two_runs(places, capsys, monkeypatch):
    drafts, kb, elsewhere = places
    logdir = drafts.parent / "tb_logs"
    for name, spike, seed in (("calm", 120, 1), ("wild", 200, 2)):
        tb_write(logdir / name, [(s, "train/loss", v) for s, v in enumerate(losses(spike, seed=seed))])
    new_check_commit_verify(capsys, monkeypatch, logdir, "wild", places, peak=f"{max(losses(200, seed=2)):.4g}")


def log_two_runs_of_one_name(uri) -> list[str]:
    """Two runs named `trial` in two experiments, logged with MLflow's own client (a batch a
    call); their ids, in order."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    ids = []
    for exp, spike in (("baseline", 120), ("fp16", 200)):
        rid = client.create_run(client.create_experiment(exp), run_name="trial").info.run_id
        points = [Metric("train/loss", v, 1_700_000_000_000 + 1000 * s, s) for s, v in enumerate(losses(spike))]
        points += [Metric("lr", 1e-3, 1_700_000_000_000 + 1000 * s, s) for s in range(300)]
        for k in range(0, len(points), 1000):
            client.log_batch(rid, metrics=points[k:k + 1000])
        client.set_terminated(rid)
        ids.append(rid)
    return ids


@pytest.mark.slow           # MLflow's client makes the database (~10 s)
def test_an_mlflow_db_of_two_runs_of_one_name(places, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    drafts, kb, elsewhere = places
    db = drafts.parent / "mlflow.db"
    first, second = log_two_runs_of_one_name(f"sqlite:///{db}")
    # both runs are `trial`: their documents are named apart by their ids in the store
    code, out, err = cli(capsys, "new", db, "--run", first[:10], "--learner", "ada")
    assert code == 0, err
    new_check_commit_verify(capsys, monkeypatch, db, second, places, peak=f"{max(losses(200)):.4g}")
    names = sorted(p.name for p in drafts.glob("*.md"))
    assert len(names) == 2 and names[0] != names[1], names
    assert all("trial-" in n for n in names) and any(first[:8] in n for n in names)
    assert front(drafts / next(n for n in names if first[:8] in n))["run_in_store"] == first   # the whole id


def test_two_runs_of_one_store_named_alike_get_documents_of_their_own(places, capsys):
    """Run folders `0` and `1` of a logdir (names that tell nothing) give `new` two files."""
    drafts, kb, elsewhere = places
    logdir = drafts.parent / "tb_logs"
    for name, spike in (("0", 120), ("1", 200)):
        tb_write(logdir / name, [(s, "train/loss", v) for s, v in enumerate(losses(spike))])
    for run in ("0", "1"):
        code, out, err = cli(capsys, "new", logdir, "--run", run, "--learner", "ada")
        assert code == 0, err
    names = sorted(p.name for p in drafts.glob("*.md"))
    assert len(names) == 2 and names[0].endswith("-0.md") and names[1].endswith("-1.md"), names
    assert [front(drafts / n)["run_in_store"] for n in names] == ["0", "1"]


@pytest.mark.slow           # the dashboard's loader process reads the run
@pytest.mark.asyncio
async def test_the_tui_opened_on_a_store_writes_and_commits_the_run_picked(places, capsys):
    from pilots import opened
    from textual.widgets import TextArea

    from postmortem.document import sections
    from postmortem.kb import settings
    from postmortem.tui.app import PostmortemApp
    from postmortem.tui.screens.commit import CommitScreen
    from postmortem.tui.screens.editor import EditorScreen
    from postmortem.tui.screens.picker import PickerScreen, runs_to_pick
    drafts, kb, elsewhere = places
    logdir = drafts.parent / "tb_logs"
    for name, spike in (("0", 120), ("1", 200)):
        tb_write(logdir / name, [(s, "train/loss", v) for s, v in enumerate(losses(spike))])
    settings.remember(kb=kb, learner="ada")
    app = PostmortemApp(str(logdir), picking=runs_to_pick(str(logdir), None, "--run ID"))
    app.session.use_settings(settings.resolve())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        await pilot.press(*["down"] * [r.id for r in picker.runs].index("1"), "enter")
        await opened(app, pilot)
        assert app.session.error is None and app.session.incident.step == 200
        await pilot.press("e")
        await pilot.pause(0.2)
        editor = app.screen
        assert isinstance(editor, EditorScreen)
        # the draft is keyed by the run picked: run 0's would be another file
        assert editor.store.path.parent == kb / ".postmortem" / "drafts"
        assert editor.store.path.name.endswith("-1-200.md") and editor.pm.run_in_store == "1"
        patterns = [h.pattern for h in editor.pm.hypotheses]
        written = editor.pm.model_copy(update={
            "evidence": [Evidence(panel="loss", observation="four times the loss for three steps",
                                  favors=patterns[:1], rules_out=patterns[1:])],
            "root_cause": "one batch of rare tokens", "remediation": ["filter the shard"],
            "verification": Verification(expectations=[Expectation(text="max loss in [200, 205] < 50")]),
            "lesson": "a spike of three steps: look at the batch first"})
        for name, text in sections.texts(written).items():
            editor.query_one(f"#{name}", TextArea).text = text
        await app.workers.wait_for_complete()
        editor.settle()
        assert not editor.problems, editor.problems
        await pilot.press("ctrl+g")
        await pilot.pause()
        commit = app.screen
        assert isinstance(commit, CommitScreen) and commit.ready, str(commit.query_one("#commit-plan").render())
        await pilot.press("enter")
        await pilot.pause()
        assert commit.committed is not None, str(commit.query_one("#commit-plan").render())
        committed = commit.committed.postmortem
    said = front(committed)
    assert said["run"] == str(logdir) and said["run_in_store"] == "1"
    code, out, _ = cli(capsys, "check", committed)          # read again: the run, not the listing
    assert code == 0 and out.strip().endswith(f"true to the run {logdir} --run 1"), out


@pytest.mark.slow           # a replay (torch)
def test_a_replay_of_a_run_in_a_store_names_it_in_what_to_type_next(places, capsys):
    """Two copies of the sample run (one manifest run id) side by side: the replay of one says
    `new STORE --run ID`, and the two documents are named apart."""
    import shutil
    from pathlib import Path
    drafts, kb, elsewhere = places
    store = drafts.parent / "two"
    sample = Path(__file__).resolve().parents[2] / "sample_runs" / "long-tail-token"
    for name in ("a", "b"):
        shutil.copytree(sample, store / name)
    code, out, err = cli(capsys, "replay", store, "--run", "b", "--arms", "faithful")
    assert code == 0, err
    assert f"next: `postmortem new {store} --run b --step 250 --replay`" in err, err
    for run in ("a", "b"):
        assert cli(capsys, "new", store, "--run", run, "--learner", "ada")[0] == 0
    names = sorted(p.name for p in drafts.glob("*.md"))
    assert len(names) == 2 and names[0].endswith("19-spike-001-a.md") and names[1].endswith("19-spike-001-b.md")


def wild_draft(drafts, capsys):
    """A logdir of runs calm and wild (TensorBoard's writer); wild's post-mortem written as
    drafts/wild.md, sections 3-7 filled. Returns the logdir."""
    logdir = drafts.parent / "tb_logs"
    for name, spike in (("calm", 120), ("wild", 200)):
        tb_write(logdir / name, [(s, "train/loss", v) for s, v in enumerate(losses(spike))])
    assert cli(capsys, "new", logdir, "--run", "wild", "--learner", "ada", "-o", "wild.md")[0] == 0
    filled(drafts / "wild.md", expect_below=50)
    return logdir


def test_a_store_moved_is_named_with_run_and_the_id_still_picks_the_run(places, capsys, monkeypatch):
    drafts, kb, elsewhere = places
    logdir = wild_draft(drafts, capsys)
    moved = drafts.parent / "moved"
    logdir.rename(moved)
    code, out, _ = cli(capsys, "check", "wild.md")
    assert code == 1 and f"front matter `run: {logdir}` is not at" in out
    code, out, _ = cli(capsys, "check", "wild.md", "--run", moved)      # the store: its run by the id
    assert code == 0 and out.strip().endswith(f"true to the run {moved} --run wild"), out
    code, out, _ = cli(capsys, "check", "wild.md", "--run", moved / "wild")   # the run's own folder
    assert code == 0 and out.strip().endswith(f"true to the run {moved / 'wild'}"), out
    code, out, err = cli(capsys, "commit", "wild.md", "--run", moved / "wild", "--kb", kb)
    assert code == 0, out + err
    said = front(kb / "learners" / "ada" / "postmortems" / read(drafts / "wild.md").filename)
    assert said["run"] == str(moved / "wild") and "run_in_store" not in said     # read as a run of its own


def test_an_mlflow_server_address_is_kept_as_it_is(tmp_path):
    from postmortem.document.runpath import locate, stored
    uri = "http://127.0.0.1:5000"
    assert stored(uri, tmp_path / "doc.md") == uri and locate(uri, tmp_path / "doc.md") == (uri, [])


def test_commit_without_the_check_still_draws_the_figure_from_the_run_in_the_store(places, capsys):
    drafts, kb, elsewhere = places
    wild_draft(drafts, capsys)
    text = (drafts / "wild.md").read_text()
    (drafts / "wild.md").write_text("\n".join(ln for ln in text.split("\n") if not ln.startswith("![")))
    code, out, err = cli(capsys, "commit", "wild.md", "--no-run-check", "--kb", kb)
    assert code == 0, out + err
    assert "without a figure" not in err, err
    pm = read(drafts / "wild.md")
    said = front(kb / "learners" / "ada" / "postmortems" / pm.filename)
    assert said["numbers"] == "not checked against the run" and said["run_in_store"] == "wild"
    assert (kb / "learners" / "ada" / "postmortems" / pm.figure_filename).is_file()


def test_a_draft_names_a_store_given_relative_by_its_whole_path(places):
    """The TUI's draft (document.draft) of a store opened as `tui tb_logs`: found again from
    any folder, as drafts are offered back from any folder."""
    from postmortem.document.draft import draft
    from postmortem.run import read_run
    drafts, kb, elsewhere = places
    for name, spike in (("calm", 120), ("wild", 200)):
        tb_write(drafts / "tb_logs" / name, [(s, "train/loss", v) for s, v in enumerate(losses(spike))])
    pm = draft(read_run("tb_logs", run="wi"), "ada")             # the one id that starts so
    assert pm.run == str(drafts / "tb_logs") and pm.run_in_store == "wild" and pm.run_id == "wild"


def test_a_document_naming_a_store_but_no_run_in_it_is_one_problem(places, capsys):
    """A post-mortem written before `run_in_store` (its `run` the store): one line saying so,
    with the runs held, and the field added by hand makes it whole."""
    drafts, kb, elsewhere = places
    logdir = wild_draft(drafts, capsys)
    text = (drafts / "wild.md").read_text()
    (drafts / "wild.md").write_text(text.replace("run_in_store: wild\n", ""))
    code, out, _ = cli(capsys, "check", "wild.md")
    assert code == 1 and out.splitlines() == [
        f"Symptoms: numbers not checked: {logdir}: holds 2 runs and the document names none of them "
        f"(front matter `run_in_store: ID`); it holds: calm, wild (`postmortem runs {logdir}` lists them); "
        "--run RUN names it, or --no-run-check goes without the comparison"], out
    (drafts / "wild.md").write_text(text)
    assert cli(capsys, "check", "wild.md")[0] == 0
