"""`check`: a post-mortem is complete, true to the run, and argued from its evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from postmortem.diagnose.catalog import PATTERNS
from postmortem.diagnose.models import Symptoms
from postmortem.diagnose.panels import BY_ID, PANELS
from postmortem.document.markdown import NO_TOKENS, front_matter, scanned, sections, table_rows
from postmortem.document.model import PLACEHOLDER, SECTIONS, PostMortem, one_line
from postmortem.document.runpath import run_id_of
from postmortem.numbers import NO_VALUE, number, same_as_shown

NUMERIC = ("spike_step", "pre_spike_loss_ema50", "peak_loss", "peak_step", "grad_norm_pre_clip", "lr",
           "batch_index")
_NOTHING = ("", "null", NO_VALUE, NO_TOKENS)      # a symptom the run has no value for (null: older documents)
_SENTENCE_END = re.compile(r"[.!?](?:\s+|$)")


@dataclass
class Problem:
    section: str
    problem: str

    def __str__(self) -> str:
        return f"{self.section}: {self.problem}"


def _sentences(text: str) -> int:
    # "e.g." and decimals are not sentence ends; a final end counts once
    cleaned = re.sub(r"\b(e\.g|i\.e|etc|vs)\.", r"\1", text)
    cleaned = re.sub(r"(\d)\.(\d)", r"\1\2", cleaned)
    return max(1, len(_SENTENCE_END.findall(cleaned.strip())))


def listed(items: list, most: int = 8) -> str:
    """`a, b, c` of the first `most` items, then `and N more`: a list is never cut silently."""
    shown = ", ".join(str(x) for x in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def panel_has_data(run_log, panel: str) -> bool:
    cols = BY_ID[panel].columns if panel in BY_ID else ()     # a cited panel must have data in the run
    for c in run_log.frame.columns:
        if any(c == p or (p.endswith("/") and c.startswith(p)) for p in cols):
            if run_log.frame[c].notna().any():
                return True
    return False


def _close(a, b) -> bool:
    # equal as the document writes numbers (numbers.number): 1.251 is the run's 1.2508078...
    return same_as_shown(a, b)


def check_text(text: str, pm: PostMortem, run_log=None, where: Path | None = None) -> list[Problem]:
    """Every problem of the document, each with its section; `where`: the document's folder,
    where the figure it shows must be."""
    problems = figure_problems(pm, where)
    _, body, twice = front_matter(text)
    problems += [Problem("front matter", f"{key} is given twice (the last would win)") for key in dict.fromkeys(twice)]
    secs = sections(body)
    problems += section_problems(body, secs)
    problems += unreadable(pm)
    problems += symptom_problems(secs)
    if run_log is not None:
        problems += _against_run(pm, run_log)
    problems += hypothesis_problems(pm, run_log)
    problems += evidence_problems(pm)
    problems += root_cause_problems(pm)
    problems += written_problems(pm)
    return said_once(problems)


def figure_problems(pm: PostMortem, where: Path | None) -> list[Problem]:
    """The figure the document shows, missing from its folder."""
    if not (pm.figure and where is not None and not (Path(where) / pm.figure).is_file()):
        return []
    # a draft moved without its figure: where the figure is wanted, and the two ways out
    wanted = Path(where).absolute() / pm.figure
    return [Problem("Figure", f"the document shows {pm.figure}, which is not at {wanted}: move "
                              "the figure there, or delete the image line under the title "
                              "(commit then draws the figure from the run)")]


def section_problems(body: str, secs: dict) -> list[Problem]:
    """Sections given twice, not of the template, missing, or still holding a placeholder."""
    problems = []
    written = [s.name for s in scanned(body)]
    for name in dict.fromkeys(written):
        if written.count(name) > 1:
            problems.append(Problem(name, f"section given {written.count(name)} times"))
        if name not in SECTIONS:
            problems.append(Problem(name, "not a section of the template (a heading in the text?)"))
    for name in SECTIONS:
        if name not in secs:
            problems.append(Problem(name, "section missing"))
        elif PLACEHOLDER in secs[name].words():
            problems.append(Problem(name, f"still has a {PLACEHOLDER} placeholder"))
    return problems


def symptom_problems(secs: dict) -> list[Problem]:
    """1. Symptoms: filled, and numbers only (the run's numbers: _against_run)."""
    problems = []
    rows = {r[0]: r[1] for r in table_rows(secs.get("Symptoms")) if len(r) >= 2}
    if all(v in _NOTHING for v in rows.values()):
        problems.append(Problem("Symptoms", "empty"))
    for key in NUMERIC:
        raw = rows.get(key, "")
        try:
            if raw not in _NOTHING:
                float(raw)
        except ValueError:
            problems.append(Problem("Symptoms", f"{key} is {raw!r}, not a number"))
    rec = rows.get("recovery_loss", "")
    if rec not in (*_NOTHING, "did not recover"):
        try:
            float(rec)
        except ValueError:
            problems.append(Problem("Symptoms", f"recovery_loss is {rec!r}: a number or 'did not recover'"))
    return problems


def hypothesis_problems(pm: PostMortem, run_log=None) -> list[Problem]:
    """2. Hypotheses: ranked, each citing a panel that exists (with the run: that has data)."""
    problems = []
    if not pm.hypotheses:
        problems.append(Problem("Hypotheses", "no hypothesis"))
    for h in pm.hypotheses:
        if h.panel not in PANELS:
            problems.append(Problem("Hypotheses", f"{h.pattern} cites {h.panel!r}, not a panel "
                                                  f"({', '.join(PANELS)})"))
        elif run_log is not None and not panel_has_data(run_log, h.panel):
            problems.append(Problem("Hypotheses", f"{h.pattern} cites the {h.panel} panel, which has no data in the run"))
    return problems


def evidence_problems(pm: PostMortem) -> list[Problem]:
    """3. Evidence: rows, each naming a panel and patterns that exist."""
    problems = []
    if not pm.evidence:
        problems.append(Problem("Discriminating evidence", "no evidence row"))
    for e in pm.evidence:
        if e.panel not in PANELS:
            problems.append(Problem("Discriminating evidence", f"{e.panel!r} is not a panel"))
        for p in e.favors + e.rules_out:
            if p not in PATTERNS:
                problems.append(Problem("Discriminating evidence", f"{p!r} is not a pattern id"))
    return problems


def root_cause_problems(pm: PostMortem) -> list[Problem]:
    """The argument: the root cause's pattern is known, favored by a row and ruled out by none,
    and every other hypothesis ruled out or dismissed."""
    root = pm.pattern
    if root is None:
        return [Problem("Lesson", "no pattern (front matter `pattern`)")]
    if root not in PATTERNS:
        return [Problem("Lesson", f"pattern {root!r} is not one of {', '.join(PATTERNS)}")]
    problems = []
    favored = {p for e in pm.evidence for p in e.favors}
    ruled_out = {p for e in pm.evidence for p in e.rules_out}
    if pm.evidence and root not in favored:
        problems.append(Problem("Discriminating evidence", f"no row favors the root cause's pattern {root}"))
    if root in ruled_out:
        problems.append(Problem("Discriminating evidence", f"a row rules out the root cause's pattern {root}"))
    for rank, h in enumerate(pm.hypotheses, 1):
        if h.pattern == root and h.dismissed:
            problems.append(Problem("Hypotheses", f"the root cause's pattern {root} is dismissed"))
        # a dismissal carries its reason in section 2: it is the author's argument
        elif h.pattern != root and h.pattern not in ruled_out and not h.dismissed:
            problems.append(Problem("Discriminating evidence", not_ruled_out(rank, h)))
    return problems


def written_problems(pm: PostMortem) -> list[Problem]:
    """4-7: the root cause in one sentence, a remediation, a verification, a one-line lesson."""
    problems = []
    if not pm.root_cause:
        problems.append(Problem("Root cause", "empty"))
    elif _sentences(pm.root_cause) > 1:
        problems.append(Problem("Root cause", f"{_sentences(pm.root_cause)} sentences; one is asked"))
    if not pm.remediation:
        problems.append(Problem("Remediation", "empty"))
    v = pm.verification
    if v.seed is None and v.epsilon is None and v.through_step is None and not v.expectations:
        problems.append(Problem("Verification", "empty: seed, epsilon, through step, expectations"))
    if not pm.lesson:
        problems.append(Problem("Lesson", "empty"))
    elif "\n" in pm.lesson.strip():
        problems.append(Problem("Lesson", "more than one line"))
    elif one_line(pm.lesson) != pm.lesson.strip():
        problems.append(Problem("Lesson", "not one line of plain text (a line break or control character)"))
    return problems


def said_once(problems: list[Problem]) -> list[Problem]:
    """Each problem once; a section still waiting for its author says so once, not twice."""
    waiting = {p.section for p in problems if PLACEHOLDER in p.problem}
    redundant = ("empty", "no hypothesis", "no evidence row")
    seen: set[str] = set()
    out: list[Problem] = []
    for p in problems:
        if p.section in waiting and (p.problem in redundant or p.problem.startswith("empty:")):
            continue
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out


def unreadable(pm: PostMortem) -> list[Problem]:
    """Each line of a section that could not be read, named with its number and as typed."""
    return [Problem(name, f"line {n} of section {SECTIONS.index(name) + 1} could not be read: {line}")
            for name, lines in pm.unreadable.items() if name in SECTIONS for n, line in lines]


def not_ruled_out(rank: int, h) -> str:
    """What to write for a hypothesis nothing rules out, in the Markdown the check reads."""
    return (f"nothing rules out {h.pattern}: a row here with {h.pattern} under `rules out`, or "
            f"dismiss it in section 2 as `{rank}. ~~**{h.pattern}**~~ [{h.panel}] ... (dismissed: the reason)`")


def _against_run(pm: PostMortem, run_log) -> list[Problem]:
    # the analysis (pandas, ~0.9 s) only when a run is compared: `check --no-run-check` goes without
    from postmortem.diagnose.analyze import analyze  # noqa: PLC0415
    if pm.run_id not in (run_id_of(run_log), run_log.run_id):      # the latter: before ids in stores
        return [Problem("Symptoms", f"the document is about run {pm.run_id}, the run given is {run_id_of(run_log)}")]
    result = analyze(run_log)
    match = [i for i in result.incidents if i.step == pm.spike_step]
    if not match:
        steps = listed([i.step for i in result.incidents], 6) or "none"
        return [Problem("Symptoms", f"the run has no incident at step {pm.spike_step} (incidents: {steps})")]
    want: Symptoms = match[0].symptoms
    problems = []
    for key, value in pm.symptoms.model_dump().items():
        if key == "unusual_tokens" and value and not want.unusual_tokens:
            continue           # the author may name the tokens the run did not log
        if not _close(value, getattr(want, key)):
            problems.append(Problem("Symptoms", f"{key} is {number(value)} but the run says {number(getattr(want, key))}"))
    return problems
