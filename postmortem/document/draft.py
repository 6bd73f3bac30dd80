"""`new`: a draft post-mortem with Symptoms and ranked Hypotheses filled from the diagnosis."""

from __future__ import annotations

from datetime import date as Date

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.catalog import SPIKE_PATTERNS
from postmortem.diagnose.models import Evidence, Incident, worst
from postmortem.diagnose.signature import of_incident
from postmortem.document.lint import listed, panel_has_data
from postmortem.document.model import HypothesisEntry, PostMortem
from postmortem.document.runpath import absolute, run_id_of
from postmortem.errors import IncidentError
from postmortem.files import safe_name
from postmortem.run import RunLog


def pick_incident(incidents: list[Incident], step: int | None, path: str) -> Incident:
    """The incident nearest `step` (the earlier of two as near), or with no step the one the
    dashboard opens on; `nearest_note` says when it is not at the step asked."""
    if not incidents:
        raise IncidentError(f"{path}: no incident to write a post-mortem about (analyze found none)")
    if step is None:
        return incidents[worst(incidents)]      # the one the dashboard opens on
    return min(incidents, key=lambda i: (abs(i.step - step), i.step))


def nearest_note(incidents: list[Incident], step: int | None, taken: Incident) -> str | None:
    """One line for the user when the incident taken is not at the step asked, else None."""
    if step is None or taken.step == step:
        return None
    return (f"no incident at step {step}; took the nearest, the {taken.kind} at step {taken.step} "
            f"(incidents at {listed([i.step for i in incidents])})")


def draft(log: RunLog, learner: str, step: int | None = None, today: Date | None = None,
          incidents: list[Incident] | None = None, replayed=None) -> PostMortem:
    """The draft. `incidents`: the run's analysis when the caller has it already (the TUI),
    so it is not run twice (`postmortem new` analyzes with --against there);
    `replayed`: a replay of the incident (a ReplayResult), whose evidence fills section 3 and
    whose ranking orders the hypotheses. The document never runs the replay: it is handed one."""
    if incidents is None:
        incidents = analyze(log).incidents
    inc = pick_incident(incidents, step, log.source.path)
    evidence = []
    if replayed is not None:
        inc = inc.model_copy(update={"hypotheses": list(replayed.hypotheses)})
        evidence = evidence_rows(replayed.evidence)
    hyps = []
    for h in inc.hypotheses:
        # What the diagnosis supports, and the four spike patterns always: the evidence
        # section then has to rule each one out or keep it.
        if h.score <= 0 and h.pattern not in SPIKE_PATTERNS:
            continue
        entry = headline(log, h)
        if entry is not None:
            hyps.append(entry)
    if any(h.pattern == "fp16-overflow" for h in hyps):
        evidence += precision_rules_out(log, evidence)
    # the learner the TUI guesses (the login name) may not be a plain name: made one; the
    # CLI refuses a bad --learner before it gets here, and commit checks the one typed
    return PostMortem(run_id=run_id_of(log), learner=safe_name(learner) if learner else "",
                      spike_step=inc.step, incident=inc.kind,
                      pattern=top_pattern(inc, hyps),
                      date=today or Date.today(), run=absolute(log.source.extras.get("store", log.source.path)),
                      run_in_store=log.source.extras.get("store_run"), symptoms=inc.symptoms,
                      hypotheses=hyps, evidence=evidence,
                      signature=of_incident(inc, log.manifest))   # `similar` reads it, not the run


NOTHING_SUPPORTS = "nothing in the run supports it; against it: "


def top_pattern(inc, hyps) -> str | None:
    """The pattern the draft puts first: the ranking's first (the diagnosis' or the replay's),
    or where no cause has support (all at 0.0, in the catalog's order, not ranked) the first
    the draft lists for arguing, so that its evidence table and its pattern agree."""
    if not inc.hypotheses:
        return None
    if any(h.score > 0 for h in inc.hypotheses) or not hyps:
        return inc.hypotheses[0].pattern
    return hyps[0].pattern


def headline(log: RunLog, h) -> HypothesisEntry | None:
    """A hypothesis headlined by what supports it, citing a panel the run has data for (the
    check asks for one); one that nothing supports says so, then what speaks against it."""
    for seen, lead in ((h.supported_by, ""), (h.contradicted_by, NOTHING_SUPPORTS)):
        cited = [o for o in seen if panel_has_data(log, o.panel)] or seen
        if cited:
            panel = cited[0].panel if panel_has_data(log, cited[0].panel) else "loss"
            return HypothesisEntry(pattern=h.pattern, panel=panel, observation=lead + cited[0].observation)
    return None


def dtype_origin(log: RunLog) -> str:
    """Where the run's dtype was read: the manifest, a configuration file beside the log, or
    the log's own lines."""
    extras = log.source.extras
    said = extras.get("facts_from", {}).get("dtype")
    if said:
        return said
    if log.manifest is not None and log.manifest.dtype:
        return "manifest.json"
    return extras.get("dtype_from", "the log")


def precision_rules_out(log: RunLog, evidence: list[Evidence]) -> list[Evidence]:
    """A run known (from its manifest, configuration or log) to train in fp32 or bf16 has no
    fp16 loss scale to overflow: one row ruling fp16-overflow out, unless one does already.
    A run whose dtype is not known gets none: the author has to argue it."""
    if log.dtype not in ("fp32", "bf16") or any("fp16-overflow" in e.rules_out for e in evidence):
        return []
    panel = "loss-scale" if panel_has_data(log, "loss-scale") else "loss"
    return [Evidence(panel=panel, observation=f"the run is {log.dtype} ({dtype_origin(log)} says so): "
                                              "no fp16 loss scale to overflow",
                     favors=[], rules_out=["fp16-overflow"])]


def evidence_rows(rows: list[Evidence]) -> list[Evidence]:
    """The replay's rows that discriminate (favor or rule out something), for section 3:
    copies, so that editing the document leaves the replay's result as it was."""
    return [r.model_copy(deep=True) for r in rows if r.favors or r.rules_out]


def apply_replay(pm: PostMortem, replay) -> PostMortem:
    """The document with a replay's evidence (a ReplayResult) added to section 3 (rows
    already there kept, none twice) and the hypotheses in the order the evidence left them;
    the author's own hypotheses and dismissals stay. When the author named no unusual tokens,
    the rarest pieces behind the replay's heavy tail are offered as them."""
    have = {(e.panel, e.observation) for e in pm.evidence}
    new = [e for e in evidence_rows(replay.evidence) if (e.panel, e.observation) not in have]
    order = {h.pattern: i for i, h in enumerate(replay.hypotheses)}
    hyps = sorted(pm.hypotheses, key=lambda h: (h.dismissed is not None, order.get(h.pattern, len(order))))
    top = replay.hypotheses[0].pattern if replay.hypotheses else pm.pattern
    pm = pm.model_copy(update={"evidence": pm.evidence + new, "hypotheses": hyps, "pattern": pm.pattern or top})
    rare = rare_tokens(replay)
    if rare and not pm.symptoms.unusual_tokens:
        pm = pm.model_copy(update={"symptoms": pm.symptoms.model_copy(update={
            "unusual_tokens": "rare pieces behind the heavy tail: " + ", ".join(rare)})})
    return pm


def rare_tokens(replay, most: int = 6) -> list[str]:
    """The heavy tail's tokens seen at most twice in training, each once, as Python writes
    them (a piece may be a space or a newline)."""
    tail = (replay.probes or {}).get("per_token") or {}
    rare = [t["token"] for t in tail.get("heavy_tail", []) if t.get("train_count") is not None
            and t["train_count"] <= 2]
    return list(dict.fromkeys(repr(t) for t in rare))[:most]
