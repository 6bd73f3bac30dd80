"""The post-mortem's figure and its numbers on real sample runs: `new` draws the PNG and the
document shows it, `check` wants it there, `commit` commits it, a replay's arms are drawn;
the document's numbers are written as a person writes them."""

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
from hypothesis import given
from hypothesis import strategies as st

from postmortem.document import figure
from postmortem.document.lint import check_text
from postmortem.document.markdown import parse, read, render
from postmortem.numbers import number, same_as_shown
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted(p.name for p in (ROOT / "sample_runs").iterdir() if p.is_dir() and p.name != "healthy")
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}
IMAGE = re.compile(r"^!\[[^\]]+\]\(([^)]+)\)$", re.M)


def pm(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **IDENTITY, **(env or {})}, timeout=300)


@pytest.mark.slow
def test_new_draws_the_figure_beside_the_draft_and_the_document_shows_it(tmp_path):
    out = tmp_path / "draft.md"
    r = pm("new", ROOT / "sample_runs" / "fp16-overflow", "--learner", "ana", "-o", out)
    assert r.returncode == 0, r.stderr
    data = (tmp_path / "draft.png").read_bytes()
    assert figure.is_png(data)
    width, height = figure.size_of(data)
    # four panels (the fp16 run logs a loss scale) of 800 pixels across
    assert width == 800 and 600 <= height <= 1000, (width, height)
    assert 20_000 < len(data) < 500_000
    text = out.read_text()
    assert IMAGE.findall(text) == ["draft.png"]
    assert text.index("draft.png") < text.index("## 1. Symptoms")        # under the title
    doc = parse(text)
    assert doc.figure == "draft.png" and render(doc) == text
    problems = [str(p) for p in check_text(text, doc, None, where=tmp_path)]
    assert not any(p.startswith("Figure") for p in problems), problems
    (tmp_path / "draft.png").unlink()
    problems = [str(p) for p in check_text(text, doc, None, where=tmp_path)]
    assert (f"Figure: the document shows draft.png, which is not at {tmp_path / 'draft.png'}: move the figure "
            "there, or delete the image line under the title (commit then draws the figure from the run)") in problems
    r = pm("check", out)
    assert r.returncode == 1 and "Figure: the document shows draft.png, which is not at" in r.stdout


@pytest.mark.slow
def test_the_panels_are_those_the_run_logs():
    log = read_run(ROOT / "sample_runs" / "fp16-overflow")
    fig = figure.draw(log, 250, kind="nan")
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss", "grad norm (pre-clip)", "LR", "loss scale"]
    assert fig.axes[3].get_yscale() == "log"
    # the incident is marked on every panel, at its step
    for ax in fig.axes:
        assert any(list(line.get_xdata()) == [250, 250] for line in ax.get_lines()), ax.get_ylabel()
    # the logged NaN losses are marked (a line cannot show them)
    assert "NaN / inf" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    lean = read_run(ROOT / "sample_runs" / "long-tail-token")
    assert [ax.get_ylabel() for ax in figure.draw(lean, 250).axes] == ["loss", "grad norm (pre-clip)", "LR"]


@pytest.mark.slow
def test_the_child_process_draws_the_same_png(tmp_path):
    """The TUI draws in a child (python -m postmortem.document.figure): the same bytes as here."""
    log = read_run(ROOT / "sample_runs" / "numerics")
    pic = figure.picture(log, 250, kind="nan")
    assert [p.column for p in pic.panels] == ["loss", "grad_norm", "lr"] and len(pic.panels[0].bad) > 0
    out = figure.write_in_child(tmp_path / "child.png", pic)
    assert out.read_bytes() == figure.png_of(pic)
    # a child that fails says why in one line
    with pytest.raises(figure.DocumentError, match="^the figure: "):
        (tmp_path / "a-file").write_text("not a folder")
        figure.write_in_child(tmp_path / "a-file" / "x.png", pic)


@pytest.mark.slow
def test_a_replays_arms_are_drawn_over_the_loss(tmp_path):
    from postmortem.diagnose.analyze import analyze
    from postmortem.replay.engine import Replayer
    log = read_run(ROOT / "sample_runs" / "long-tail-token")
    inc = analyze(log).incidents[0]
    result = Replayer(log, inc, "cpu").replay(("faithful", "swap-batch"))
    fig = figure.draw(log, inc.step, result, inc.kind)
    # a panel of its own under the run's, on the replay's steps
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss", "grad norm (pre-clip)", "LR", "loss, replayed"]
    replayed = fig.axes[-1]
    labels = [t.get_text() for t in replayed.get_legend().get_texts()]
    # drawn highest first at the incident: the arm that takes the spike away on top
    assert labels == ["logged", "replay: faithful", "replay: swap-batch"], labels
    swapped = next(line for line in replayed.get_lines() if line.get_label() == "replay: swap-batch")
    steps = list(swapped.get_xdata())
    assert inc.step in steps and min(steps) in (result.checkpoint, result.checkpoint + 1), steps
    # the swapped batch takes the spike away: the arm stays far below the logged peak
    assert max(swapped.get_ydata()) < inc.symptoms.peak_loss / 2
    # the run's panels widen to the replay's first step; the replay's panel spans its steps
    assert fig.axes[0].get_xlim()[0] <= min(steps)
    assert replayed.get_xlim() == (min(steps) - 0.5, max(steps) + 0.5)
    path = figure.write(tmp_path / "with-arms.png", log, inc.step, result, inc.kind)
    assert figure.size_of(path.read_bytes())[0] == 800


def _finished(draft_text: str) -> str:
    """The draft with sections 3-7 written as the example's author wrote them."""
    done = read(EXAMPLE)
    doc = parse(draft_text)
    return render(doc.model_copy(update={
        "evidence": done.evidence, "root_cause": done.root_cause, "remediation": done.remediation,
        "verification": done.verification, "lesson": done.lesson, "pattern": done.pattern,
        "symptoms": doc.symptoms.model_copy(update={"unusual_tokens": done.symptoms.unusual_tokens})}))


@pytest.mark.slow
def test_new_then_commit_puts_the_figure_in_the_commit(tmp_path):
    run = ROOT / "sample_runs" / "long-tail-token"
    kb = tmp_path / "kb"
    repo = git.Repo.init(kb, initial_branch="main")
    (kb / "README.md").write_text("kb\n")
    repo.index.add(["README.md"])
    repo.index.commit("start")
    draft = tmp_path / "draft.md"
    assert pm("new", run, "--learner", "ada", "-o", draft).returncode == 0
    draft.write_text(_finished(draft.read_text()))
    r = pm("check", draft, "--run", run)
    assert r.returncode == 0, r.stdout                      # the numbers as written are the run's
    r = pm("commit", draft, "--learner", "ada", "--run", run, "--repo", kb)
    assert r.returncode == 0, r.stderr
    name = read(draft).figure_filename
    assert name in r.stdout
    head = repo.head.commit
    folder = "learners/ada/postmortems"
    md = sorted(f for f in head.stats.files if f.endswith(".md") and f.startswith(folder))[0]
    assert sorted(head.stats.files) == sorted([md, f"{folder}/{name}", "learners/ada/lessons.md", ".gitattributes"])
    assert (head.tree / f"{folder}/{name}").data_stream.read() == (tmp_path / "draft.png").read_bytes()
    committed = (kb / md).read_text()
    assert IMAGE.findall(committed) == [name]                 # the committed document shows the committed PNG
    assert pm("check", kb / md, "--run", run).returncode == 0
    r = pm("lessons", "--repo", kb, "--pattern", "long-tail-token")
    assert "19-spike-001" in r.stdout


@pytest.mark.slow
def test_without_matplotlib_new_writes_the_document_and_says_why_in_one_line(tmp_path):
    out = tmp_path / "d.md"
    # matplotlib made unimportable in the child (as where the `figure` extra is not installed)
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from postmortem.cli import main\n"
            f"sys.exit(main(['new', {str(ROOT / 'sample_runs' / 'numerics')!r}, '--learner', 'ana', '-o', {str(out)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "figure" in line]
    assert said == ["postmortem: no figure: the figure needs matplotlib: pip install -e '.[figure]' "
                    "(the `figure` extra)"], r.stderr
    assert out.is_file() and not list(tmp_path.glob("*.png"))
    assert parse(out.read_text()).figure is None and "![" not in out.read_text()


# -- the numbers ---------------------------------------------------------------------------

DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?:e[-+]?\d+)?")


def significant(number_text: str) -> int:
    """Significant digits of a decimal as written: 0.0005205 has 4, 1.2508078326284633 has 17."""
    digits = re.sub(r"e[-+]?\d+$", "", number_text).replace(".", "").lstrip("0")
    return len(digits)


@pytest.mark.parametrize("name", SAMPLES)
def test_a_drafts_words_have_no_none_no_repr_and_no_long_float(name):
    from postmortem.diagnose.analyze import analyze
    from postmortem.document.draft import draft
    log = read_run(ROOT / "sample_runs" / name)
    incidents = analyze(log).incidents
    text = render(draft(log, "ana", incidents=incidents))
    body = text.split("\n---\n", 1)[1]
    assert "None" not in text and "null" not in text
    assert "{" not in body and "'" not in body, body               # no dict or str reprs
    long = [n for n in DECIMAL.findall(text) if significant(n) > 6]
    assert not long, long
    for cell in re.findall(r"^\| \w+ \| (.*) \|$", body, re.M):
        digits = re.sub(r"e[-+]\d+$", "", cell).replace(".", "").replace("-", "").lstrip("0")
        assert not digits.isdigit() or len(digits) <= 6, cell
    # hypotheses are headlined by what supports them, or say nothing does
    doc = parse(text)
    inc = next(i for i in incidents if i.step == doc.spike_step)
    against = {h.pattern: [o.observation for o in h.contradicted_by] for h in inc.hypotheses}
    for h in doc.hypotheses:
        assert h.observation not in against[h.pattern], h
    # the numbers as written are the run's at that precision
    assert not [p for p in check_text(text, doc, log) if p.section == "Symptoms"]


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10**12, 10**12))
def test_a_number_written_twice_is_written_the_same(x):
    shown = number(x)
    again = number(float(shown)) if not isinstance(x, int) else number(int(shown))
    assert again == shown
    if isinstance(x, float) and math.isfinite(x) and math.isfinite(float(f"{x:.4g}")):
        assert same_as_shown(float(shown), x)
        assert len(re.sub(r"e[-+]\d+$", "", shown).replace("-", "").replace(".", "").lstrip("0")) <= 6 \
            or float(shown).is_integer()


def test_numbers_read_as_a_person_writes_them():
    assert [number(v) for v in (1.2508078326284633, 0.0013005942891115968, 65536.0, 99999.7, 13.172680854797363,
                                float("nan"), float("inf"), -float("inf"), None, 250, 2.5e-7)] == \
        ["1.251", "0.001301", "65536", "100000", "13.17", "NaN", "+inf", "-inf", "no value", "250", "2.5e-07"]
    assert same_as_shown(1.251, 1.2508078326284633) and not same_as_shown(1.252, 1.2508078326284633)
    from postmortem.numbers import counts
    assert counts({"nan": 539, "+inf": 1088, "-inf": 0, "zeros": 0, "size": 4096}) == "539 NaN, 1088 +inf of 4096 values"


def test_an_older_document_with_every_digit_still_passes_against_its_run(tmp_path):
    """A document written before numbers were rounded keeps every digit: still the run's."""
    text = EXAMPLE.read_text().replace("| peak_loss | 5.157 |", "| peak_loss | 5.157378196716309 |") \
        .replace("| lr | 0.001301 |", "| lr | 0.0013005942891115968 |")
    doc = parse(text)
    assert doc.symptoms.peak_loss == 5.157378196716309
    shutil.copy(EXAMPLE.with_suffix(".png"), tmp_path)
    assert check_text(text, doc, read_run(ROOT / "sample_runs" / "long-tail-token"), where=tmp_path) == []


@pytest.mark.slow
def test_commit_draws_the_figure_of_a_document_that_has_none(tmp_path):
    """An older document (no figure) committed with its run: the figure is drawn from the run
    and committed beside it, and the committed document shows it."""
    run = ROOT / "sample_runs" / "long-tail-token"
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    doc = tmp_path / "older.md"
    doc.write_text(re.sub(r"\n!\[[^\]]+\]\([^)]+\)\n", "", EXAMPLE.read_text())
                   .replace("learner: example", "learner: ada"))           # ada's, committed as hers
    assert parse(doc.read_text()).figure is None
    r = pm("commit", doc, "--learner", "ada", "--run", run, "--repo", kb, "--init")
    assert r.returncode == 0, r.stderr
    head = git.Repo(kb).head.commit
    png = f"learners/ada/postmortems/{EXAMPLE.stem}.png"
    assert png in head.stats.files and figure.is_png((head.tree / png).data_stream.read())
    assert IMAGE.findall((kb / "learners/ada/postmortems" / EXAMPLE.name).read_text()) == [EXAMPLE.stem + ".png"]
