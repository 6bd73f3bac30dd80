"""The post-mortem document: round trip, the lint on purpose-broken documents, new, verify."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from postmortem.document.lint import check_text
from postmortem.document.markdown import parse, render
from postmortem.document.verify import verify
from postmortem.errors import DocumentError
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
RUN = ROOT / "sample_runs" / "long-tail-token"


def pm(*args):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def problems(text, run=None, where=EXAMPLE.parent):
    return [str(p) for p in check_text(text, parse(text), read_run(run) if run else None, where)]


@pytest.mark.slow
def test_the_example_passes_the_lint_against_its_run():
    text = EXAMPLE.read_text()
    assert problems(text, RUN) == []
    r = pm("check", EXAMPLE, "--run", RUN)
    assert r.returncode == 0 and "true to the run" in r.stdout


def test_render_parse_render_is_the_identity():
    text = EXAMPLE.read_text()
    assert render(parse(text)) == text
    doc = parse(text)
    assert doc.pattern == "long-tail-token" and doc.spike_step == 250 and len(doc.evidence) == 5
    assert doc.verification.expectations[0].text == "step 250 loss < 2.0"


@pytest.mark.slow
def test_new_writes_a_draft_with_symptoms_and_hypotheses(tmp_path):
    out = tmp_path / "draft.md"
    r = pm("new", ROOT / "sample_runs" / "lr-discontinuity", "--learner", "ana", "-o", out)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    doc = parse(text)
    assert doc.symptoms.spike_step == 250 and doc.symptoms.lr is not None      # the LR jump that began it (issue 25)
    assert doc.hypotheses[0].pattern == "lr-discontinuity"
    assert render(doc) == text
    lint = problems(text, ROOT / "sample_runs" / "lr-discontinuity", where=out.parent)
    assert "Root cause: still has a TODO placeholder" in lint
    assert not any(p.startswith("Symptoms") for p in lint)      # the numbers are the run's
    assert pm("new", ROOT / "sample_runs" / "lr-discontinuity", "--learner", "ana", "-o", out).returncode == 2


BROKEN = [
    # (what to break, the problem the lint must report)
    (lambda t: t.replace("## 5. Remediation", "## 5. Fixes"), "Remediation: section missing"),
    (lambda t: re.sub(r"(## 4. Root cause\n\n<!--.*-->\n\n).*\n", r"\1TODO later\n", t), "Root cause: still has a TODO"),
    (lambda t: t.replace("| peak_loss | 5.157 |", "| peak_loss | about five |"), "Symptoms: peak_loss is 'about five', not a number"),
    (lambda t: t.replace("| peak_loss | 5.157 |", "| peak_loss | 5.2 |"), "Symptoms: peak_loss is 5.2 but the run says 5.157"),
    # one digit off at the precision shown is off
    (lambda t: t.replace("| peak_loss | 5.157 |", "| peak_loss | 5.158 |"), "Symptoms: peak_loss is 5.158 but the run says 5.157"),
    (lambda t: t.replace("![loss, grad norm", "![the figure").replace("(2026-11-22-19-spike-001.png)", "(gone.png)"),
     "Figure: the document shows gone.png, which is not at"),
    (lambda t: t.replace("[grad-norm] grad norm 13.2", "[gradients] grad norm 13.2"), "cites 'gradients', not a panel"),
    (lambda t: t.replace("4. **optimizer-reset** [loss]", "4. **optimizer-reset** [activations]"), "activations panel, which has no data"),
    (lambda t: t.replace("that the model had almost never seen.", "that the model had almost never seen. It spiked."), "Root cause: 2 sentences"),
    (lambda t: t.replace("suspecting the optimizer.", "suspecting\nthe optimizer."), "Lesson: more than one line"),
    (lambda t: t.replace("| long-tail-token | optimizer-reset, bad-init |", "| long-tail-token | bad-init |")
     .replace("| long-tail-token | lr-discontinuity, optimizer-reset, fp16-overflow |", "| long-tail-token | lr-discontinuity, fp16-overflow |"),
     "nothing rules out optimizer-reset"),
    (lambda t: t.replace("| long-tail-token | bad-data |", "| long-tail-token | bad-data, long-tail-token |"), "a row rules out the root cause's pattern"),
    (lambda t: t.replace("| long-tail-token |", "|  |"), "no row favors the root cause's pattern"),
    (lambda t: t.replace("1. **long-tail-token** [grad-norm] grad norm 13.2 at step 250 is 15.6x its rolling mean "
                         "with a smooth LR", "1. ~~**long-tail-token**~~ [grad-norm] grad norm 13.2 (dismissed: no)"),
     "the root cause's pattern long-tail-token is dismissed"),
    # duplicates and headings that are not the template's: the last would win silently
    (lambda t: t.replace("learner: example\n", "learner: example\nspike_step: 12\n"),
     "front matter: spike_step is given twice"),
    (lambda t: t + "\n## 4. Root cause\n\nSomething else.\n", "Root cause: section given 2 times"),
    (lambda t: t.replace("suspecting the optimizer.", "suspecting the optimizer.\n\n## 8. Extra\n\nsmuggled"),
     "Extra: not a section of the template"),
    (lambda t: t.replace("suspecting the optimizer.", "suspecting the optimizer.\u2028really"),
     "Lesson: not one line of plain text"),
]


def test_a_dismissal_with_its_reason_stands_for_a_ruling_out():
    text = (EXAMPLE.read_text()
            .replace("| long-tail-token | optimizer-reset, bad-init |", "| long-tail-token | bad-init |")
            .replace("| long-tail-token | lr-discontinuity, optimizer-reset, fp16-overflow |",
                     "| long-tail-token | lr-discontinuity, fp16-overflow |"))
    assert any("nothing rules out optimizer-reset" in p for p in problems(text, RUN))
    dismissed = text.replace("4. **optimizer-reset** [loss] nothing in the run supports it; against it: the run never "
                             "restarted", "4. ~~**optimizer-reset**~~ [loss] the run never restarted (dismissed: one "
                             "segment, no resume)")
    assert dismissed != text and problems(dismissed, RUN) == []


@pytest.mark.parametrize("breaker,expected", BROKEN)
def test_the_lint_catches_each_defect(breaker, expected):
    text = breaker(EXAMPLE.read_text())
    assert text != EXAMPLE.read_text()
    found = problems(text, RUN)
    assert any(expected in p for p in found), found


@pytest.mark.slow
def test_check_cli_json_and_exit_code(tmp_path):
    broken = tmp_path / "b.md"
    broken.write_text(EXAMPLE.read_text().replace("suspecting the optimizer.", "suspecting\nthe optimizer."))
    r = pm("check", broken, "--json")
    assert r.returncode == 1
    import json
    data = json.loads(r.stdout)
    assert data["ok"] is False and {"section": "Lesson", "problem": "more than one line"} in data["problems"]


@pytest.mark.slow
def test_unreadable_document_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.md"
    bad.write_text("# no front matter\n")
    r = pm("check", bad)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "front matter" in r.stderr
    with pytest.raises(DocumentError):
        parse("---\nrun_id: [\n---\n")


@pytest.mark.slow
def test_verify_against_a_rerun(tmp_path):
    doc = parse(EXAMPLE.read_text())
    healthy = read_run(ROOT / "sample_runs" / "healthy")        # the same seed without the junk shard
    outcomes = verify(doc, healthy, read_run(RUN))
    assert [o.ok for o in outcomes] == [True, True, True], [(o.expectation, o.measured) for o in outcomes]
    assert outcomes[0].measured.startswith("max difference 0")
    again = verify(doc, read_run(RUN), read_run(RUN))              # the spike is still there
    assert [o.ok for o in again] == [True, False, False]
    r = pm("verify", EXAMPLE, "--run", ROOT / "sample_runs" / "healthy")
    assert r.returncode == 0 and r.stdout.count("pass") == 3


@pytest.mark.slow
def test_a_150k_row_table_reads_whole_and_row_for_row():
    """The line reader of sections and tables (linear; benchmarks/bench_check.py times it)."""
    text = EXAMPLE.read_text()
    at = text.index("\n", text.index("|---|", text.index("## 3."))) + 1
    rows = "".join(f"| loss | row {i} \\| escaped | long-tail-token | fp16-overflow |\n" if i % 1000 == 0 else
                   f"| loss | row {i} | long-tail-token | fp16-overflow |\n" for i in range(150_000))
    big = text[:at] + rows + text[at:]
    doc = parse(big)
    assert len(doc.evidence) == 150_000 + len(parse(text).evidence)
    assert doc.evidence[0].observation == "row 0 | escaped" and doc.evidence[1].observation == "row 1"
    assert doc.evidence[149_999].favors == ["long-tail-token"]
    assert check_text(big, doc) == check_text(text, parse(text))


@pytest.mark.slow
@given(st.lists(st.lists(st.text(alphabet="ab |\\", max_size=6), min_size=1, max_size=5), max_size=8),
       st.integers(1, 5))
def test_tables_split_at_once_or_row_by_row_alike(table, count):
    from postmortem.document.markdown import _cells, _rows
    lines = ["|" + "|".join(cells) + "|" for cells in table]
    assert _rows(lines, count) == [_cells(line, count) for line in lines]


def test_the_signature_and_a_mapped_run_id_survive_the_round_trip():
    from postmortem.diagnose.signature import Signature
    doc = parse(EXAMPLE.read_text())
    doc = doc.model_validate({**doc.model_dump(), "run_id": "../../x|y",
                              "signature": Signature(pattern="long-tail-token", phase="mid", grad_lead=0)})
    assert doc.run_id != "../../x|y" and doc.run_name == "../../x|y"
    text = render(doc)
    again = parse(text)
    assert (again.run_id, again.run_name, again.signature) == (doc.run_id, doc.run_name, doc.signature)
    assert render(again) == text
    with pytest.raises(DocumentError, match="learner"):
        parse(text.replace("learner: example", "learner: ../bob"))


@pytest.mark.slow
def test_a_draft_carries_its_signature_and_a_plain_learner():
    from postmortem.document.draft import draft
    from postmortem.files import check_name
    doc = draft(read_run(RUN), "John Doe")             # a login name the TUI may guess
    assert check_name(doc.learner) == doc.learner
    assert doc.signature is not None and doc.signature.pattern == doc.pattern
    assert doc.signature.rise and doc.signature.recovery
    assert parse(render(doc)).signature == doc.signature
    # the rise is the dashboard's (the analysis' own), under the same name in the front matter
    from postmortem.diagnose.analyze import analyze
    inc = next(i for i in analyze(read_run(RUN)).incidents if i.step == doc.spike_step)
    assert doc.signature.rise == inc.rise and f"rise: {inc.rise}" in render(doc)
    # a document written before the rename still reads: peak_ratio is the rise
    older = render(doc).replace(f"rise: {inc.rise}", "peak_ratio: 4.12")
    assert parse(older).signature.rise == 4.12


def test_similar_names_and_writes_the_rise_as_the_dashboard_does():
    """The dashboard's `rise x3.96` is `rise: ... (x3.96 vs x3.96)` in similar, not another ratio."""
    from postmortem.diagnose.analyze import analyze
    from postmortem.diagnose.models import worst
    from postmortem.diagnose.signature import of_incident
    from postmortem.kb.similar import find_similar
    from postmortem.numbers import rise
    log = read_run(RUN)
    incidents = analyze(log).incidents
    shown = rise(incidents[worst(incidents)].rise)          # as the dashboard's incidents table writes it
    match = next(m for m in find_similar(ROOT, of_incident(incidents[worst(incidents)], log.manifest))
                 if m.path == EXAMPLE)
    assert f"rise: match ({shown} vs {shown})" in match.why, match.why
    assert not any("peak_ratio" in w for w in match.why)
