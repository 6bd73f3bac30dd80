"""The document as the editor edits it, without a screen: the text form of sections 3-7 and
its parse, the draft store on disk, a replay's result applied to a document."""

import math
from datetime import date
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.models import Evidence
from postmortem.document import sections
from postmortem.document.draft import apply_replay, draft
from postmortem.document.draftstore import DraftStore, discard, draft_path, typed_path
from postmortem.document.lint import check_text
from postmortem.document.markdown import parse, read, render
from postmortem.replay.models import ArmResult, ReplayResult
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
RUN = ROOT / "sample_runs" / "long-tail-token"


def blank(pm):
    """The document with sections 3-7, the pattern and the unusual tokens emptied."""
    return pm.model_copy(update={"evidence": [], "root_cause": "", "remediation": [], "lesson": "",
                                 "verification": type(pm.verification)(), "pattern": None,
                                 "symptoms": pm.symptoms.model_copy(update={"unusual_tokens": None})})


def test_sections_as_text_and_back_are_the_document():
    pm = read(EXAMPLE)
    shown = sections.texts(pm)
    assert set(shown) == set(sections.AREAS)
    assert shown["evidence"].splitlines()[3].startswith("lr | logged LR at step 250")
    back = sections.collect(blank(pm), shown, pm.hypotheses, pm.pattern, pm.symptoms.unusual_tokens)
    assert back == pm
    assert render(back) == EXAMPLE.read_text()


def test_lines_still_being_typed_are_left_out():
    pm = read(EXAMPLE)
    areas = {**sections.texts(blank(pm)),
             "evidence": "loss | a spike at 250 | long-tail-token\nhalf a line\n | no panel | x\nlr|flat||lr-discontinuity",
             "remediation": "  one change  \n\n", "verification": "seed: 12\nepsilon: not yet\nexpect: step 9",
             "lesson": " the lesson \n"}
    got = sections.collect(pm, areas, [], "  ", "  ")
    assert [(e.panel, e.observation, e.favors, e.rules_out) for e in got.evidence] == [
        ("loss", "a spike at 250", ["long-tail-token"], []), ("lr", "flat", [], ["lr-discontinuity"])]
    assert got.remediation == ["one change"] and got.lesson == "the lesson"
    assert got.verification.seed == 12 and got.verification.epsilon is None and not got.verification.expectations
    assert got.pattern is None and got.symptoms.unusual_tokens is None and got.hypotheses == []


def test_the_writing_starts_at_the_first_empty_section():
    pm = read(EXAMPLE)
    assert sections.first_empty(blank(pm)) == "evidence"
    assert sections.first_empty(pm.model_copy(update={"root_cause": "", "lesson": ""})) == "root_cause"
    assert sections.first_empty(pm) == "evidence"          # nothing left empty: the top


def test_the_draft_store_saves_restores_sets_aside_and_discards(tmp_path):
    pm = read(EXAMPLE)
    store = DraftStore(tmp_path, pm)
    assert store.path == draft_path(tmp_path, pm) == tmp_path / ".postmortem" / "drafts" / "19-spike-001-250.md"
    assert store.restore() == (None, {})
    typed = {**sections.texts(pm), "pattern": "long-tail-token", "unusual_tokens": "d en",
             "evidence": sections.texts(pm)["evidence"] + "\nhalf a line"}
    assert store.save(pm, typed) is True
    assert store.save(pm, typed) is False                   # unchanged: not written again
    store.path.write_text("changed behind the store's back")
    assert store.save(pm, typed) is False                   # the store compares with its last write
    assert store.save(pm, {**typed, "lesson": "another"}) is True
    again = DraftStore(tmp_path, pm)                        # the editor opened again
    restored, inputs = again.restore()
    assert restored == pm and inputs["evidence"].endswith("half a line") and inputs["lesson"] == "another"
    bak = again.set_aside()
    assert bak.name == "19-spike-001-250.md.bak" and bak.exists() and not again.path.exists()
    assert typed_path(again.path).with_name("19-spike-001-250.typed.json.bak").exists()
    assert again.restore() == (None, {})
    assert again.save(pm, typed) is True                    # after a start over: written afresh
    again.discard()
    assert not again.path.exists() and not again.typed_path.exists()
    discard(again.path)                                     # twice: nothing to do


def test_a_draft_that_no_longer_parses_keeps_its_typed_inputs(tmp_path):
    pm = read(EXAMPLE)
    store = DraftStore(tmp_path, pm)
    store.save(pm, {"lesson": "kept"})
    store.path.write_text("---\nnot: a post-mortem\n---\n")
    assert store.restore() == (None, {"lesson": "kept"})
    store.typed_path.write_text("[1, 2]")                   # not the store's: ignored
    assert store.restore() == (None, {})


def replay_of(inc, rows):
    """A replay's result as the replay hands it over (through its JSON line, as the TUI gets
    it): its evidence, its ranking (the diagnosis' reversed) and the per-token probe."""
    tail = [{"token": "ett", "train_count": 1}, {"token": " h", "train_count": 0}, {"token": "ett", "train_count": 1},
            {"token": "the", "train_count": 900}, {"token": "x", "train_count": None}]
    result = ReplayResult(run_id="19-spike-001", incident_step=inc.step, checkpoint=200, device="cpu",
                          faithful_max_diff=0.0, faithful=True,
                          arms={"swap-batch": ArmResult("swap-batch", {250: 1.2, 251: math.inf})},
                          probes={"per_token": {"heavy_tail": tail}}, evidence=rows,
                          hypotheses=list(reversed(inc.hypotheses)))
    return ReplayResult.model_validate_json(result.model_dump_json())


ROWS = [Evidence("batch", "the batch swapped: no spike", favors=["long-tail-token"], rules_out=["lr-discontinuity"]),
        Evidence("loss", "faithful to the run")]


def plain_row(pm) -> tuple[str, str]:
    """The row a draft of an fp32 run has before any replay: fp16-overflow ruled out."""
    return pm.evidence[0].panel, pm.evidence[0].observation


def test_the_draft_is_handed_a_replay():
    log = read_run(RUN)
    inc = analyze(log).incidents[0]
    plain = draft(log, "ana", inc.step, today=date(2026, 11, 22))
    # an fp32 run (its manifest says so) has no loss scale to overflow: the one row a plain draft has
    assert [e.rules_out for e in plain.evidence] == [["fp16-overflow"]]
    assert plain.hypotheses[0].pattern == inc.hypotheses[0].pattern
    done = replay_of(inc, ROWS)
    pm = draft(log, "ana", inc.step, today=date(2026, 11, 22), replayed=done)
    # only the rows that tell causes apart; the hypotheses in the replay's order
    assert [(e.panel, e.observation) for e in pm.evidence] == [("batch", "the batch swapped: no spike"),
                                                               plain_row(plain)]
    assert done.arms["swap-batch"].losses[251] == math.inf          # a diverged arm survives the JSON line
    assert pm.pattern == done.hypotheses[0].pattern
    kept = [h.pattern for h in done.hypotheses]
    assert [h.pattern for h in pm.hypotheses] == [p for p in kept if p in {h.pattern for h in pm.hypotheses}]


def test_a_replay_applied_to_a_document_adds_once_and_keeps_the_authors_words():
    log = read_run(RUN)
    inc = analyze(log).incidents[0]
    pm = draft(log, "ana", inc.step, today=date(2026, 11, 22))
    last = pm.hypotheses[-1]
    pm = pm.model_copy(update={"hypotheses": [pm.hypotheses[0].model_copy(update={"dismissed": "ruled out"}),
                                              *pm.hypotheses[1:]]})
    done = replay_of(inc, ROWS)
    once = apply_replay(pm, done)
    assert [e.observation for e in once.evidence] == [pm.evidence[0].observation, "the batch swapped: no spike"]
    assert apply_replay(once, done).evidence == once.evidence          # applied twice: no row twice
    assert once.hypotheses[-1].dismissed == "ruled out"                  # dismissed ones go last
    assert once.hypotheses[0].pattern == last.pattern
    assert once.symptoms.unusual_tokens == "rare pieces behind the heavy tail: 'ett', ' h'"
    mine = pm.model_copy(update={"symptoms": pm.symptoms.model_copy(update={"unusual_tokens": "mine"}),
                                 "pattern": "bad-data"})
    theirs = apply_replay(mine, done)
    assert theirs.symptoms.unusual_tokens == "mine" and theirs.pattern == "bad-data"


def test_verification_facts_on_one_line_split_by_slashes_are_read_as_the_hint_shows():
    pm = read(EXAMPLE)
    one = "seed: 0 / epsilon: 0.05 / through step: 300 / expect: step 250 loss < 1.5"
    got = sections.collect(pm, {**sections.texts(pm), "verification": one}, pm.hypotheses, pm.pattern, "")
    v = got.verification
    assert (v.seed, v.epsilon, v.through_step, [e.text for e in v.expectations]) == (0, 0.05, 300, ["step 250 loss < 1.5"])
    assert got.unreadable == {}
    text = render(got)
    assert "TODO" not in text and not [p for p in check_text(text, parse(text)) if p.section == "Verification"]
    lines = "seed: 0\nepsilon: 0.05"                                   # one a line still reads
    assert sections.collect(pm, {**sections.texts(pm), "verification": lines}, [], "", "").verification.epsilon == 0.05


def test_a_line_that_cannot_be_read_is_kept_in_the_document_and_named_by_the_check():
    pm = read(EXAMPLE)
    mine = "the fp16 loss scale was too high at 262144 and overflowed at step 250"
    areas = {**sections.texts(pm), "evidence": mine + "\n" + sections.texts(pm)["evidence"],
             "verification": "seed: 0 / epsilon: zero\nthrough step: 300"}
    got = sections.collect(pm, areas, pm.hypotheses, pm.pattern, "")
    assert got.unreadable == {"Discriminating evidence": [(1, mine)], "Verification": [(1, "seed: 0 / epsilon: zero")]}
    assert len(got.evidence) == len(pm.evidence) and got.verification.through_step == 300
    text = render(got)
    assert mine in text and "- seed: 0 / epsilon: zero" in text                # in the document, as typed
    back = parse(text)
    assert render(back) == text
    said = [str(p) for p in check_text(text, back)]
    assert f"Discriminating evidence: line {len(pm.evidence) + 1} of section 3 could not be read: {mine}" in said
    assert "Verification: line 2 of section 6 could not be read: seed: 0 / epsilon: zero" in said
    assert not any("TODO" in p for p in said)


def test_a_section_6_with_only_an_unreadable_line_says_so_not_todo():
    pm = blank(read(EXAMPLE))
    got = sections.collect(pm, {**sections.texts(pm), "verification": "seed zero"}, [], "", "")
    text = render(got)
    said = [str(p) for p in check_text(text, parse(text)) if p.section == "Verification"]
    assert said == ["Verification: line 1 of section 6 could not be read: seed zero",
                    "Verification: empty: seed, epsilon, through step, expectations"]


def test_a_replay_applied_keeps_a_typed_line_that_is_not_a_row_in_its_place():
    log = read_run(RUN)
    inc = analyze(log).incidents[0]
    pm = draft(log, "ana", inc.step, today=date(2026, 11, 22))
    mine = "the fp16 loss scale was too high at 262144 and overflowed at step 250"
    row = sections.texts(pm)["evidence"]
    typed = sections.collect(pm, {**sections.texts(pm), "evidence": f"{mine}\n{row}"}, pm.hypotheses, "", "")
    shown = sections.texts(apply_replay(typed, replay_of(inc, ROWS)))["evidence"].splitlines()
    assert shown[:2] == [mine, row] and shown[2].startswith("batch | the batch swapped")


@pytest.mark.slow
def test_a_draft_moved_without_its_figure_is_told_where_and_commits_with_one_drawn(tmp_path):
    """The figure follows the document: check names the exact path it wants; without the image
    line the commit draws the figure from the run."""
    import os
    import subprocess
    import sys

    import git
    from worked_example import as_learners
    doc = as_learners(tmp_path / "drafts")
    moved = tmp_path / "elsewhere" / "renamed.md"
    moved.parent.mkdir()
    doc.rename(moved)
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x.invalid",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@x.invalid"}

    def pm(*args):
        return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
    r = pm("check", moved)
    wanted = moved.parent / "2026-11-22-19-spike-001.png"
    assert r.returncode == 1 and r.stdout.startswith(f"Figure: the document shows {wanted.name}, which is not "
                                                     f"at {wanted}: move the figure there"), r.stdout
    text = moved.read_text()
    moved.write_text("".join(line for line in text.splitlines(keepends=True) if not line.startswith("![")))
    assert pm("check", moved).returncode == 0
    kb = tmp_path / "kb"
    git.Repo.init(kb)
    r = pm("commit", moved, "--kb", kb)
    assert r.returncode == 0, r.stderr
    assert (kb / "learners" / "ada" / "postmortems" / wanted.name).stat().st_size > 20_000
    assert "![" in (kb / "learners" / "ada" / "postmortems" / "2026-11-22-19-spike-001.md").read_text()
