"""Render a PostMortem through postmortem/templates/postmortem.md and parse it back (markdown-it-py).

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
from postmortem.document.model import (
    PLACEHOLDER,
    SECTIONS,
    HypothesisEntry,
    PostMortem,
    Verification,
    figure_alt,
    split_patterns,
)
from postmortem.errors import DocumentError
from postmortem.numbers import NO_VALUE, number

# shipped inside the package (package data): an installed wheel writes post-mortems too
TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "postmortem.md"
_FRONT = ("schema_version", "run_id", "learner", "pattern", "spike_step", "incident", "date", "run")
_TODO = {
    "hypotheses": f"{PLACEHOLDER}: rank the hypotheses, each citing a panel.",
    "evidence": f"| {PLACEHOLDER} | what tells the causes apart | | |",
    "root_cause": f"{PLACEHOLDER}: one sentence: what caused the incident.",
    "remediation": f"- {PLACEHOLDER}: what changes in the data, config or code.",
    "verification": f"- {PLACEHOLDER}: seed, epsilon, through step T, and expectations.",
    "lesson": f"{PLACEHOLDER}: one line for the lessons file.",
}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


NO_TOKENS = "none named"


def _symptom(key: str, v) -> str:
    # numbers at the precision the editor shows (the check compares at the same precision)
    if v is None and key == "unusual_tokens":
        return NO_TOKENS
    return number(v)


def render(pm: PostMortem, template: Path = TEMPLATE) -> str:
    front = {}
    for k in _FRONT:
        front[k] = getattr(pm, k)
        if k == "run_id" and pm.run_name:
            front["run_name"] = pm.run_name        # the run's own id, beside its safe form
    front["date"] = pm.date.isoformat()
    if pm.run_in_store is not None:
        front["run_in_store"] = pm.run_in_store     # said only of a run inside a store of several
    if pm.numbers:
        front["numbers"] = pm.numbers         # said only when the Symptoms were not checked
    if pm.signature is not None:
        front["signature"] = pm.signature.model_dump(exclude_none=True)     # what is not known: left out
    sym = "\n".join(f"| {k} | {_cell(_symptom(k, v))} |" for k, v in pm.symptoms.model_dump().items())
    hyps = "\n".join(
        f"{i}. " + (f"~~**{h.pattern}**~~" if h.dismissed else f"**{h.pattern}**")
        + f" [{h.panel}] {h.observation}" + (f" (dismissed: {h.dismissed})" if h.dismissed else "")
        for i, h in enumerate(pm.hypotheses, 1)) or _TODO["hypotheses"]
    ev = evidence_text(pm)
    rem = "\n".join(f"- {r}" for r in pm.remediation) or _TODO["remediation"]
    ver = "\n".join(f"- {line}" for line in [*pm.verification.lines(), *unreadable_lines(pm, "Verification")]
                    ) or _TODO["verification"]
    lesson = (f"Pattern: `{pm.pattern}`\n\n" if pm.pattern else "") + (pm.lesson or _TODO["lesson"])
    return Template(template.read_text()).substitute(
        front_matter=yaml.safe_dump(front, sort_keys=False).strip(), run_id=pm.run_id,
        incident=pm.incident, spike_step=pm.spike_step, symptoms=sym, hypotheses=hyps, evidence=ev,
        root_cause=pm.root_cause or _TODO["root_cause"], remediation=rem, verification=ver,
        lesson=lesson, figure=f"\n![{figure_alt(pm.spike_step)}]({pm.figure})\n" if pm.figure else "")


def unreadable_lines(pm: PostMortem, section: str) -> list[str]:
    """The lines of a section that could not be read, as typed."""
    return [line for _, line in pm.unreadable.get(section, [])]


def evidence_text(pm: PostMortem) -> str:
    """Section 3's table rows, then each line that is not a row as a quote of its own (kept,
    as typed, for the check to name); the TODO row only when the author wrote nothing."""
    rows = "\n".join(f"| {_cell(e.panel)} | {_cell(e.observation)} | {_cell(', '.join(e.favors))} | "
                     f"{_cell(', '.join(e.rules_out))} |" for e in pm.evidence)
    quotes = "\n\n".join(f"> {line}" for line in unreadable_lines(pm, "Discriminating evidence"))
    if not quotes:
        return rows or _TODO["evidence"]
    return f"{rows}\n\n{quotes}"


# --- parsing -------------------------------------------------------------------------
# The document is cut into sections and tables by lines (linear, whatever the size: a
# 150k-row table costs a regex split a row); markdown-it reads only the rest, which is prose.

_MD = MarkdownIt("commonmark").enable("strikethrough")
_HEADING = re.compile(r"^(\d)\.\s+(.+)$")
_H2 = re.compile(r"^ {0,3}##(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_TERMINATOR = re.compile(r"^ {0,3}(?:[#>]|`{3}|~{3}|<|(?:[-+*]|\d{1,9}[.)])(?:\s|$)|([-*_])(?:\s*\1){2,}\s*$)")
_PIPE = re.compile(r"(?<!\\)\|")
# the figure: an image on its own line between the title and the first section
_FIGURE = re.compile(r"^!\[[^\]\n]*\]\((?P<src>[^()\s]+)\)[ \t]*$", re.M)
_HYP = re.compile(r"^(~~)?\*\*(?P<pattern>[\w-]+)\*\*(?:~~)?\s+\[(?P<panel>[\w-]+)\]\s+(?P<obs>.*?)"
                  r"(?:\s+\(dismissed: (?P<why>.*)\))?$")


class _Unique(yaml.SafeLoader):
    """Safe YAML that remembers the keys a mapping holds twice (YAML keeps the last)."""

    duplicates: list[str]

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str) and key in seen:
                self.duplicates.append(key)
            seen.add(key)
        return super().construct_mapping(node, deep)


def front_matter(text: str) -> tuple[dict, str, list[str]]:
    """(front matter, body, keys given twice)."""
    if not text.startswith("---\n"):
        raise DocumentError("no front matter (the file must start with ---)")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise DocumentError("front matter is not closed with ---")
    try:
        loader = _Unique(text[4:end])      # refuses a NUL or control character here already
    except yaml.YAMLError as err:
        raise DocumentError(f"front matter is not YAML: {_where(err, text)}") from None
    loader.duplicates = []
    try:
        front = loader.get_single_data() or {}
    except yaml.YAMLError as err:
        raise DocumentError(f"front matter is not YAML: {str(err).splitlines()[0]}") from None
    finally:
        loader.dispose()
    if not isinstance(front, dict):
        raise DocumentError("front matter is not a mapping")
    return front, text[end + 5:], loader.duplicates


def _where(err, text: str) -> str:
    """A reader's refusal in one line, with the document's line of the character refused."""
    first = str(err).splitlines()[0]
    position = getattr(err, "position", None)
    if position is None:
        return first
    return f"{first} (line {text[:4 + position].count(chr(10)) + 1})"


def _split_front(text: str) -> tuple[dict, str]:
    front, body, _ = front_matter(text)
    return front, body


class Section:
    """One `## N. Name` section: its prose as markdown-it tokens, its tables as rows of cells."""

    def __init__(self, name: str):
        self.name = name
        self.lines: list[str] = []
        self.tables: list[tuple[list[str], list[list[str]]]] = []     # (header, body rows)

    @property
    def tokens(self) -> list:
        if not hasattr(self, "_tokens"):
            self._tokens = [t for t in _MD.parse("\n".join(self.lines)) if t.type != "html_block"]
        return self._tokens

    def words(self) -> str:
        """Every word of the section, prose and table cells (where a placeholder may hide)."""
        cells = (" ".join(c) for head, rows in self.tables for c in (head, *rows))
        return " ".join([*(t.content for t in self.tokens if t.type == "inline"), *cells])


def _cells(line: str, count: int | None = None) -> list[str]:
    """A table row's cells, split on the pipes that are not escaped (as markdown-it does),
    padded or cut to the header's `count`."""
    line = line.strip()
    if line[:1] == "|":
        line = line[1:]
    if line[-1:] == "|" and line[-2:] != "\\|":
        line = line[:-1]
    if "\\" in line:
        cells = [c.replace("\\|", "|").strip() for c in _PIPE.split(line)]
    else:
        cells = [c.strip() for c in line.split("|")]
    if count is not None and len(cells) != count:
        cells = cells[:count] + [""] * (count - len(cells))
    return cells


def _rows(lines: list[str], count: int) -> list[list[str]]:
    """The cells of a table's body rows. Rows written as this tool writes them (a pipe at
    each end, `count` cells, no escape) are split all at once; any other row by itself."""
    if not lines:
        return []
    if all(ln[:1] == "|" and ln[-1:] == "|" and ln.count("|") == count + 1 for ln in lines):
        block = "\n".join(lines)
        if "\\" not in block:
            cells = [c.strip() for c in block[1:-1].replace("|\n|", "|").split("|")]
            return [cells[k:k + count] for k in range(0, len(cells), count)]
    return [_cells(row, count) for row in lines]


def scan(body: str) -> list[Section]:
    """The sections in the order written (a name twice is twice here)."""
    out: list[Section] = []
    lines = body.split("\n")
    fence, comment, i, n = None, False, 0, len(lines)
    current: Section | None = None
    while i < n:
        line = lines[i]
        if fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
        elif comment:
            comment = "-->" not in line
            i += 1
            continue
        elif (m := _FENCE.match(line)) is not None:
            fence = m[1][0] * 3
        elif line.lstrip(" ").startswith("<!--") and len(line) - len(line.lstrip(" ")) <= 3:
            comment = "-->" not in line
            i += 1
            continue
        elif line.startswith(("##", " ")) and (m := _H2.match(line)) is not None and not line.lstrip().startswith("###"):
            title = (m[1] or "").strip()
            h = _HEADING.match(title)
            current = Section(h[2].strip() if h else title)
            out.append(current)
            i += 1
            continue
        elif (current is not None and "|" in line and i + 1 < n and _DELIMITER.match(lines[i + 1])
              and ("|" in lines[i + 1] or "-" in lines[i + 1])):
            head = _cells(line)
            if len(head) == len(_cells(lines[i + 1])):
                start = i = i + 2
                while i < n:
                    row = lines[i]
                    # a row starting with a pipe is a row; anything else may end the table
                    if row[:1] != "|" and (not row.strip() or _TERMINATOR.match(row)):
                        break
                    i += 1
                current.tables.append((head, _rows(lines[start:i], len(head))))
                current.lines.append("")
                continue
        if current is not None:
            current.lines.append(line)
        i += 1
    return out


_CACHE: dict[str, list[Section]] = {}


def scanned(body: str) -> list[Section]:
    """scan(body), once for the parse and the check of the same text."""
    hit = _CACHE.get(body)
    if hit is None:
        hit = scan(body)
        _CACHE.clear()
        _CACHE[body] = hit
    return hit


def sections(body: str) -> dict[str, Section]:
    """Section name -> the section (the last, for a name given twice: `check` says so)."""
    return {s.name: s for s in scanned(body)}


_EMPTY = Section("")


def table_rows(sec: Section | None) -> list[list[str]]:
    """The body rows of the section's tables."""
    return [row for _, rows in (sec or _EMPTY).tables for row in rows]


def _items(sec: Section | None) -> list[str]:
    """The text of each list item."""
    out, depth = [], 0
    for t in (sec or _EMPTY).tokens:
        if t.type == "list_item_open":
            depth += 1
            out.append("")
        elif t.type == "list_item_close":
            depth -= 1
        elif t.type == "inline" and depth:
            out[-1] = (out[-1] + " " + t.content).strip()
    return out


def _text(sec: Section | None) -> str:
    return "\n".join(t.content for t in (sec or _EMPTY).tokens if t.type == "inline").strip()


def quoted(sec: Section | None, after: int) -> list[tuple[int, str]]:
    """The quoted lines of a section (`> ...`: section 3's lines that are not rows), numbered
    after its `after` rows."""
    lines = [ln.strip()[1:].strip() for ln in (sec or _EMPTY).lines if ln.strip().startswith(">")]
    return [(after + k, line) for k, line in enumerate((ln for ln in lines if ln), 1)]


def _todo(s: str) -> bool:
    return s.strip().startswith(PLACEHOLDER)


def _symptom_value(key: str, raw: str):
    raw = raw.strip()
    if raw in ("null", "", NO_VALUE, NO_TOKENS):
        return None
    if key in ("dtype", "unusual_tokens"):
        return raw
    if key == "recovery_loss" and raw == "did not recover":
        return raw
    try:
        return int(raw) if key in ("spike_step", "peak_step", "batch_index") else float(raw)
    except ValueError:
        return None          # the check reports it as "not a number"


def figure_of(body: str) -> str | None:
    """The figure the document shows under its title (None when it shows none)."""
    head = body.split("\n## ", 1)[0]
    m = _FIGURE.search(head)
    return m["src"] if m else None


def parse(text: str) -> PostMortem:
    """A post-mortem file back into the model; DocumentError names what is wrong."""
    front, body = _split_front(text)
    secs = sections(body)
    missing = [s for s in SECTIONS if s not in secs]
    data: dict = {k: front.get(k) for k in (*_FRONT, "run_name", "run_in_store", "signature", "numbers") if front.get(k) is not None}
    data.pop("schema_version", None)
    sym = {}
    for row in table_rows(secs.get("Symptoms")):
        if len(row) >= 2 and row[0] in Symptoms.model_fields:
            sym[row[0]] = _symptom_value(row[0], row[1])
    data["symptoms"] = Symptoms(**sym)
    hyps = []
    for item in _items(secs.get("Hypotheses")):
        m = _HYP.match(item)
        if m:
            hyps.append(HypothesisEntry(pattern=m["pattern"], panel=m["panel"], observation=m["obs"],
                                        dismissed=m["why"] if m.group(1) else None))
    data["hypotheses"] = hyps
    ev = []
    for row in table_rows(secs.get("Discriminating evidence")):
        if len(row) >= 4 and not row[0].startswith(PLACEHOLDER):
            # dicts, validated with the document in one call (a model a row: 1.6 s in 150k
            # rows); a cell of one pattern, the common case, is not split
            f, r = row[2], row[3]
            ev.append({"panel": row[0], "observation": row[1],
                       "favors": [f] if f and "," not in f else split_patterns(f),
                       "rules_out": [r] if r and "," not in r else split_patterns(r)})
    data["evidence"] = ev
    unreadable = {"Discriminating evidence": quoted(secs.get("Discriminating evidence"), len(ev))}
    data["figure"] = figure_of(body)
    root = _text(secs.get("Root cause"))
    data["root_cause"] = "" if _todo(root) else root
    data["remediation"] = [r for r in _items(secs.get("Remediation")) if not _todo(r)]
    data["verification"], unreadable["Verification"] = Verification.read(_items(secs.get("Verification")))
    data["unreadable"] = {k: v for k, v in unreadable.items() if v}
    lesson = "\n".join(line for line in _text(secs.get("Lesson")).split("\n")
                       if not line.startswith("Pattern:")).strip()
    data["lesson"] = "" if _todo(lesson) else lesson
    try:
        pm = PostMortem(**data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        if where == "figure":          # the image under the title, not the front matter
            raise DocumentError(f"the figure's link: {first['msg'].removeprefix('Value error, ')}") from None
        raise DocumentError(f"front matter: {where}: {first['msg']}") from None
    pm.__dict__["missing_sections"] = missing
    return pm


def read(path: str | Path) -> PostMortem:
    """The post-mortem at `path`; DocumentError names the file once, then what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DocumentError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise DocumentError(f"{path}: not UTF-8 text") from None
    try:
        return parse(text)
    except DocumentError as err:
        raise DocumentError(f"{path}: {err}") from None
