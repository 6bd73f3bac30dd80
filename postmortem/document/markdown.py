"""Render a PostMortem through templates/postmortem.md and parse it back (markdown-it-py).

render(parse(render(pm))) == render(pm): every field has exactly one spelling.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

import yaml
from markdown_it import MarkdownIt
from pydantic import ValidationError

from postmortem.diagnose.models import Symptoms
from postmortem.document.model import (PLACEHOLDER, SECTIONS, EvidenceRow, HypothesisEntry,
                                       PostMortem, Verification, split_patterns)

TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "postmortem.md"
_FRONT = ("schema_version", "run_id", "learner", "pattern", "spike_step", "incident", "date", "run")
_TODO = {
    "hypotheses": f"{PLACEHOLDER}: rank the hypotheses, each citing a panel.",
    "evidence": f"| {PLACEHOLDER} | what tells the causes apart | | |",
    "root_cause": f"{PLACEHOLDER}: one sentence: what caused the incident.",
    "remediation": f"- {PLACEHOLDER}: what changes in the data, config or code.",
    "verification": f"- {PLACEHOLDER}: seed, epsilon, through step T, and expectations.",
    "lesson": f"{PLACEHOLDER}: one line for the lessons file.",
}


class DocumentError(ValueError):
    """A post-mortem file that cannot be read; the message says where."""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def render(pm: PostMortem, template: Path = TEMPLATE) -> str:
    front = {k: getattr(pm, k) for k in _FRONT}
    front["date"] = pm.date.isoformat()
    sym = "\n".join(f"| {k} | {_cell(_num(v))} |" for k, v in pm.symptoms.model_dump().items())
    hyps = "\n".join(
        f"{i}. " + (f"~~**{h.pattern}**~~" if h.dismissed else f"**{h.pattern}**")
        + f" [{h.panel}] {h.observation}" + (f" (dismissed: {h.dismissed})" if h.dismissed else "")
        for i, h in enumerate(pm.hypotheses, 1)) or _TODO["hypotheses"]
    ev = "\n".join(f"| {_cell(e.panel)} | {_cell(e.observation)} | {_cell(', '.join(e.favors))} | "
                   f"{_cell(', '.join(e.rules_out))} |" for e in pm.evidence) or _TODO["evidence"]
    rem = "\n".join(f"- {r}" for r in pm.remediation) or _TODO["remediation"]
    ver = "\n".join(f"- {line}" for line in pm.verification.lines()) or _TODO["verification"]
    lesson = (f"Pattern: `{pm.pattern}`\n\n" if pm.pattern else "") + (pm.lesson or _TODO["lesson"])
    return Template(template.read_text()).substitute(
        front_matter=yaml.safe_dump(front, sort_keys=False).strip(), run_id=pm.run_id,
        incident=pm.incident, spike_step=pm.spike_step, symptoms=sym, hypotheses=hyps, evidence=ev,
        root_cause=pm.root_cause or _TODO["root_cause"], remediation=rem, verification=ver,
        lesson=lesson)


# --- parsing -------------------------------------------------------------------------

_MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
_HEADING = re.compile(r"^(\d)\.\s+(.+)$")
_HYP = re.compile(r"^(~~)?\*\*(?P<pattern>[\w-]+)\*\*(?:~~)?\s+\[(?P<panel>[\w-]+)\]\s+(?P<obs>.*?)"
                  r"(?:\s+\(dismissed: (?P<why>.*)\))?$")


def _split_front(text: str) -> tuple[dict, str]:
    if not text.startswith("---\n"):
        raise DocumentError("no front matter (the file must start with ---)")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise DocumentError("front matter is not closed with ---")
    try:
        front = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as err:
        raise DocumentError(f"front matter is not YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(front, dict):
        raise DocumentError("front matter is not a mapping")
    return front, text[end + 5:]


def sections(body: str) -> dict[str, list]:
    """Section name -> its markdown-it tokens (HTML comments dropped)."""
    out: dict[str, list] = {}
    current = None
    tokens = _MD.parse(body)
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open" and t.tag == "h2":
            m = _HEADING.match(tokens[i + 1].content.strip())
            current = m.group(2).strip() if m else tokens[i + 1].content.strip()
            out[current] = []
            i += 3
            continue
        if current is not None and t.type != "html_block":
            out[current].append(t)
        i += 1
    return out


def _table(tokens) -> list[list[str]]:
    rows, row, in_body = [], None, False
    for t in tokens:
        if t.type == "tbody_open":
            in_body = True
        elif t.type == "tr_open" and in_body:
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content.replace("\\|", "|").strip())
        elif t.type == "tr_close" and row is not None:
            rows.append(row)
            row = None
    return rows


def _items(tokens) -> list[str]:
    """The text of each list item."""
    out, depth = [], 0
    for t in tokens:
        if t.type == "list_item_open":
            depth += 1
            out.append("")
        elif t.type == "list_item_close":
            depth -= 1
        elif t.type == "inline" and depth:
            out[-1] = (out[-1] + " " + t.content).strip()
    return out


def _text(tokens) -> str:
    return "\n".join(t.content for t in tokens if t.type == "inline").strip()


def _todo(s: str) -> bool:
    return s.strip().startswith(PLACEHOLDER)


def _symptom_value(key: str, raw: str):
    raw = raw.strip()
    if raw in ("null", ""):
        return None
    if key in ("dtype", "unusual_tokens"):
        return raw
    if key == "recovery_loss" and raw == "did not recover":
        return raw
    try:
        return int(raw) if key in ("spike_step", "peak_step", "batch_index") else float(raw)
    except ValueError:
        return None          # the check reports it as "not a number"


def parse(text: str) -> PostMortem:
    """A post-mortem file back into the model; DocumentError names what is wrong."""
    front, body = _split_front(text)
    secs = sections(body)
    missing = [s for s in SECTIONS if s not in secs]
    data: dict = {k: front.get(k) for k in _FRONT if front.get(k) is not None}
    data.pop("schema_version", None)
    sym = {}
    for row in _table(secs.get("Symptoms", [])):
        if len(row) >= 2 and row[0] in Symptoms.model_fields:
            sym[row[0]] = _symptom_value(row[0], row[1])
    data["symptoms"] = Symptoms(**sym)
    hyps = []
    for item in _items(secs.get("Hypotheses", [])):
        m = _HYP.match(item)
        if m:
            hyps.append(HypothesisEntry(pattern=m["pattern"], panel=m["panel"], observation=m["obs"],
                                        dismissed=m["why"] if m.group(1) else None))
    data["hypotheses"] = hyps
    ev = []
    for row in _table(secs.get("Discriminating evidence", [])):
        if len(row) >= 4 and not _todo(row[0]):
            ev.append(EvidenceRow(panel=row[0], observation=row[1],
                                  favors=split_patterns(row[2]), rules_out=split_patterns(row[3])))
    data["evidence"] = ev
    root = _text(secs.get("Root cause", []))
    data["root_cause"] = "" if _todo(root) else root
    data["remediation"] = [r for r in _items(secs.get("Remediation", [])) if not _todo(r)]
    try:
        data["verification"] = Verification.from_lines(_items(secs.get("Verification", [])))
    except ValueError as err:
        raise DocumentError(f"Verification: {err}") from None
    lesson = "\n".join(line for line in _text(secs.get("Lesson", [])).splitlines()
                       if not line.startswith("Pattern:")).strip()
    data["lesson"] = "" if _todo(lesson) else lesson
    try:
        pm = PostMortem(**data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise DocumentError(f"front matter: {where}: {first['msg']}") from None
    pm.__dict__["missing_sections"] = missing
    return pm


def read(path: str | Path) -> PostMortem:
    path = Path(path)
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DocumentError(f"{path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise DocumentError(f"{path}: not UTF-8 text") from None
