"""The merge of branch `detectors` (issue 28): its edits to the readers of Event.notes and to
the importers of diagnose/detect.py, as rules, to re-apply on main's newer versions of those
files (analyze, catalog, context, patterns, symptoms, trees; helper diagtypes edited other
lines of them). Run from the repository root after taking main's side of those files:

    python docs/sessions/2026-11-26b/28-detectors-readers.py && ruff check --select I --fix postmortem/diagnose

It rewrites in place and prints what it could not place (nothing, on main at 05d15ab)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

FILES = ["analyze", "catalog", "context", "patterns", "symptoms", "trees", "signature", "models"]
KEY = {"from": "scale_from", "to": "scale_to"}
DETECTORS = {
    "loss_spikes": "loss_spikes", "grad_norm_spikes": "grad_norm_spikes", "scaler_events": "cascades",
    "divergence": "divergence", "divergence_too_short": "divergence", "divergence_windows": "divergence",
    "resumes": "resumes", "segment_starts": "resumes", "Event": "event", "overlaps": "event",
}
# whole phrases first (their meaning is more than a key's name), then the generic readers
PHRASES = [
    ('notes={**ev.notes, "from_spike": True}', "notes=replace(ev.notes, from_spike=True)"),
    ('notes={**ev.notes, "detected_at": ev.step}', "notes=replace(ev.notes, detected_at=ev.step)"),
    ('"confirmed_at" in ev.notes', "ev.notes.confirmed_at is not None"),
    ('"persistent_step" not in e.notes', "e.notes.persistent_step is None"),
    ('"persistent_step" in e.notes', "e.notes.persistent_step is not None"),
    ('getattr(ev, "notes", {}).get("sparse")', "ev.notes.sparse"),
    ("{ev.notes.get('rise', 0):.0%}", "{ev.notes.rise or 0:.0%}"),
    ("{ev.notes.get('confirmed_at', ev.peak_step)}",
     "{ev.peak_step if ev.notes.confirmed_at is None else ev.notes.confirmed_at}"),
    ('host.notes["later_cascades"] = host.notes.get("later_cascades", 0) + 1', "host.notes.later_cascades += 1"),
    ('host.notes["skipped"] = (host.notes.get("skipped") or 0)', "host.notes.skipped = (host.notes.skipped or 0)"),
    ('host.notes.update(persistent=p.notes["persistent"], at_start=p.notes["at_start"],\n'
     '                              floor=p.notes["to"], persistent_step=p.step)',
     "host.notes.persistent, host.notes.at_start = p.notes.persistent, p.notes.at_start\n"
     "            host.notes.floor, host.notes.persistent_step = p.notes.scale_to, p.step"),
    ('notes["sparse"]', "notes.sparse"),
]
READER = re.compile(r"""\.notes(?:\.get\(\s*(["'])(\w+)\1\s*\)|\[\s*(["'])(\w+)\3\s*\])""")


def _attribute(m: re.Match) -> str:
    key = m.group(2) or m.group(4)
    return f".notes.{KEY.get(key, key)}"


def rewrite(text: str) -> str:
    for old, new in PHRASES:
        text = text.replace(old, new)
    text = READER.sub(_attribute, text)
    text = text.replace("from postmortem.diagnose.detect import", "from postmortem.diagnose.detectors.event import")
    if "from postmortem.diagnose import detect\n" in text:
        used = sorted(set(re.findall(r"\bdetect\.(\w+)", text)))
        lines = [f"from postmortem.diagnose.detectors.{DETECTORS[n]} import {n}\n" for n in used]
        text = text.replace("from postmortem.diagnose import detect\n", "".join(lines))
        text = re.sub(r"\bdetect\.(\w+)", r"\1", text)
    return text


def main() -> int:
    left = []
    for name in FILES:
        path = Path("postmortem/diagnose") / f"{name}.py"
        new = rewrite(path.read_text())
        path.write_text(new)
        left += [f"{path}:{n}: {line.strip()}" for n, line in enumerate(new.splitlines(), 1)
                 if re.search(r"notes\.get\(|notes\[|\bdetect\.|diagnose\.detect\b", line)]
    print("\n".join(left) or "every reader rewritten")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
