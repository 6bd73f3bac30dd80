"""PostMortem: the seven sections of the template, each in the shape the template asks."""

from __future__ import annotations

import re
from datetime import date as Date
from typing import Literal

from pydantic import BaseModel, field_validator, model_validator

from postmortem.diagnose.models import Evidence, Symptoms
from postmortem.diagnose.signature import Signature
from postmortem.files import check_name, safe_name

SCHEMA_VERSION = 1
SECTIONS = ("Symptoms", "Hypotheses", "Discriminating evidence", "Root cause", "Remediation",
            "Verification", "Lesson")
PLACEHOLDER = "TODO"        # what a draft leaves in a section for the author
# Characters that are line breaks to someone (a renderer, str.splitlines) and control characters
_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_FIGURE_BAD = re.compile(r"[\s()\[\]<>\\]")


def figure_alt(step: int | None) -> str:
    """The figure's words (what GitHub says of the image, what a terminal shows instead)."""
    return f"loss, grad norm, LR and loss scale where logged, around step {step}"


def one_line(text: str) -> str:
    """Text as one line of plain text: every kind of line break a space, control characters gone."""
    return _CONTROL.sub("", _BREAKS.sub(" ", str(text))).strip()


class HypothesisEntry(BaseModel):
    """One ranked hypothesis: its pattern, the panel it cites and what the panel shows."""

    pattern: str
    panel: str
    observation: str
    dismissed: str | None = None        # the reason, when the author dismissed it


_EXPECT = re.compile(
    r"^(?:step\s+(?P<step>\d+)\s+(?P<m1>[\w/.-]+)"
    r"|(?P<agg>max|min|mean)\s+(?P<m2>[\w/.-]+)\s+in\s+\[\s*(?P<lo>\d+)\s*,\s*(?P<hi>\d+)\s*\])"
    r"\s*(?P<op><=|>=|<|>)\s*(?P<value>[-+\d.eE]+)$")


class Expectation(BaseModel):
    """`step 312 loss < 2.5` or `max grad_norm in [300, 400] < 3.0`."""

    text: str

    @field_validator("text")
    @classmethod
    def _parses(cls, v: str) -> str:
        if not _EXPECT.match(v.strip()):
            raise ValueError(f"not an expectation: {v!r} (want 'step N METRIC < X' or "
                             f"'max METRIC in [A, B] < X')")
        return v.strip()

    @property
    def parts(self) -> dict:
        match = _EXPECT.match(self.text)
        assert match is not None, self.text          # the validator above let only a match in
        return match.groupdict()


class Verification(BaseModel):
    seed: int | None = None
    epsilon: float | None = None
    through_step: int | None = None
    expectations: list[Expectation] = []

    def lines(self) -> list[str]:
        """`seed: N`, `epsilon: X`, `through step: T`, `expect: ...`: one fact a line."""
        out = [f"seed: {self.seed}" if self.seed is not None else None,
               f"epsilon: {self.epsilon!r}" if self.epsilon is not None else None,
               f"through step: {self.through_step}" if self.through_step is not None else None]
        return [x for x in out if x] + [f"expect: {e.text}" for e in self.expectations]

    @classmethod
    def read(cls, lines: list[str]) -> tuple["Verification", list[tuple[int, str]]]:
        """The facts of the lines, one a line or several on one line split by ` / ` (as the
        editor's hint shows them), and the lines that do not read as (line number, line):
        a line reads whole or not at all. Blank lines and the draft's TODO are skipped."""
        data: dict = {"expectations": []}
        unreadable = []
        for n, line in enumerate(lines, 1):
            if not line.strip() or line.strip().startswith(PLACEHOLDER):
                continue
            got: dict = {"expectations": []}
            try:
                for fact in facts(line):
                    read_fact(fact, got)
            except ValueError:
                unreadable.append((n, line.strip()))
                continue
            data["expectations"] += got.pop("expectations")
            data.update(got)
        return cls(**data), unreadable


_FACT_SPLIT = re.compile(r"\s+/\s+")


def facts(line: str) -> list[str]:
    """`seed: 0 / epsilon: 0.05` -> ["seed: 0", "epsilon: 0.05"]; one fact alone is itself."""
    return [f for f in _FACT_SPLIT.split(line.strip()) if f]


def read_fact(fact: str, data: dict) -> None:
    """One `key: value` of section 6 into `data`; ValueError when it does not read."""
    key, _, value = fact.partition(":")
    key, value = key.strip().lower(), value.strip()
    if key == "seed":
        data["seed"] = int(value)
    elif key == "epsilon":
        data["epsilon"] = float(value)
    elif key == "through step":
        data["through_step"] = int(value)
    elif key == "expect":
        data["expectations"].append(Expectation(text=value))
    else:
        raise ValueError(f"{key!r} is not seed, epsilon, through step or expect")


def split_patterns(text: str) -> list[str]:
    """`a, b` -> ["a", "b"], as the evidence table writes favors and rules out."""
    if "," not in text:
        return [text.strip()] if text.strip() else []
    return [x.strip() for x in text.split(",") if x.strip()]


class PostMortem(BaseModel):
    schema_version: int = SCHEMA_VERSION
    run_id: str                             # a plain name (files.check_name): it makes the file name
    run_name: str | None = None             # the run's own id, when run_id had to be made safe from it
    learner: str
    pattern: str | None = None
    spike_step: int | None = None
    date: Date
    run: str | None = None                  # where the run was read from (a store of several: the store)
    run_in_store: str | None = None         # the run's id in that store (`--run ID`): read again with it
    numbers: str | None = None              # "not checked against the run": committed --no-run-check
    incident: Literal["nan", "spike", "divergence", "bad-start"] = "spike"
    symptoms: Symptoms
    hypotheses: list[HypothesisEntry] = []
    evidence: list[Evidence] = []
    root_cause: str = ""
    remediation: list[str] = []
    verification: Verification = Verification()
    lesson: str = ""
    signature: Signature | None = None      # written when drafted: `similar` compares documents only
    figure: str | None = None               # the PNG beside the document, a path relative to it
    # section name -> the lines of it that could not be read, as (line number, line): kept,
    # written into the document, and reported by the check (nothing typed is dropped)
    unreadable: dict[str, list[tuple[int, str]]] = {}

    @field_validator("figure")
    @classmethod
    def _relative_figure(cls, v: str | None) -> str | None:
        # a Markdown image's target: relative (it travels with the document), one word
        if v is not None and (not v or v.startswith("/") or ".." in v.split("/") or _FIGURE_BAD.search(v)):
            raise ValueError(f"figure {v!r}: a file name beside the document is asked")
        return v

    @model_validator(mode="before")
    @classmethod
    def _safe_run_id(cls, data):
        """A run id that cannot be a file name (a path, a `|`, a newline, 300 characters) is
        mapped to a safe one, and the original is kept beside it as `run_name`."""
        if isinstance(data, dict) and isinstance(data.get("run_id"), str):
            rid = data["run_id"]
            safe = safe_name(rid)
            if safe != rid:
                data = {**data, "run_id": safe, "run_name": data.get("run_name") or one_line(rid)[:200] or None}
        return data

    @field_validator("learner")
    @classmethod
    def _plain_learner(cls, v: str) -> str:
        return v if v == "" else check_name(v, "learner name")

    @field_validator("run_in_store", mode="before")
    @classmethod
    def _id_as_text(cls, v):
        # a hand-edited `run_in_store: 0` (a TensorBoard run folder named 0) is YAML's number
        return None if v is None else one_line(str(v)) or None

    @field_validator("run_name")
    @classmethod
    def _one_line_name(cls, v: str | None) -> str | None:
        return None if v is None else (one_line(v)[:200] or None)

    @property
    def filename(self) -> str:
        return f"{self.date.isoformat()}-{self.run_id}.md"

    @property
    def figure_filename(self) -> str:
        """The figure's name once committed: the document's, as a PNG."""
        return f"{self.date.isoformat()}-{self.run_id}.png"
