"""How well the diagnosis does on runs with known incidents, one set at a time.

    python benchmarks/accuracy/run.py --set tuning            # the table
    python benchmarks/accuracy/run.py --set reporting --json  # + benchmarks/results/accuracy-reporting.json

Reads every run of the set (the second trainer's are generated first, cached), runs
`analyze(read_run(path), Thresholds())`, and matches the incidents to the labels: a reported
incident matches a true one when its step lies in the label's range widened by the label's
`tolerance` (in the log's own steps; a label with a segment also needs that segment); each true
incident takes the nearest unmatched report. Scored per run: found / missed / false (reports that
match nothing, duplicates included), right step (|step - true step| <= step_tolerance), right top
cause (the first hypothesis is the true pattern and scores above 0, over the labels that name one:
a cause listed first at 0.0 stands in the catalog's order, not by evidence). A run that does
not read counts as all missed and is listed. Optional labels (an event INDEX.md leaves open)
count neither way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARED = ROOT.parent / "shared"
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(HERE))


@dataclass
class Entry:
    run: str
    origin: str            # minigpt | real | lab2
    path: Path
    label: dict


@dataclass
class Score:
    found: int = 0
    missed: int = 0
    false: int = 0
    right_step: int = 0
    right_cause: int = 0
    with_cause: int = 0
    optional_found: int = 0
    details: list[str] = field(default_factory=list)

    def add(self, other: "Score") -> None:
        for k in ("found", "missed", "false", "right_step", "right_cause", "with_cause", "optional_found"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def match(labels: list[dict], reports: list[dict]) -> Score:
    """Score one run: `labels` the true incidents (step, range, tolerance, step_tolerance, cause,
    segment, optional), `reports` what analyze said (step, segment, top: the first pattern)."""
    s = Score()
    taken: set[int] = set()
    # Required labels pick first, so an optional one never steals a true incident's report.
    for lab in sorted(labels, key=lambda lab: bool(lab.get("optional"))):
        # `shifts`: a log that numbers steps by epoch and batch leaves the global step to the
        # reader (epochs counted from 0 or from 1): the label holds at each shift.
        shifts = [0, *lab.get("shifts", [])]
        lo, hi = lab["range"][0] - lab["tolerance"], lab["range"][1] + lab["tolerance"]

        def off(r, lab=lab, shifts=shifts, lo=lo, hi=hi):     # this label's, bound now (B023)
            return min(abs(r["step"] - sh - lab["step"]) for sh in shifts
                       if lo <= r["step"] - sh <= hi)

        cands = [i for i, r in enumerate(reports) if i not in taken
                 and any(lo <= r["step"] - sh <= hi for sh in shifts)
                 and (lab.get("segment") is None or r.get("segment") == lab["segment"])]
        if not cands:
            if not lab.get("optional"):
                s.missed += 1
                s.details.append(f"missed {lab['kind']} at {lab['step']}")
            continue
        best = min(cands, key=lambda i: off(reports[i]))
        taken.add(best)
        # Duplicates: other reports of the same event are false, not found again.
        rep = reports[best]
        if lab.get("optional"):
            s.optional_found += 1
            continue
        s.found += 1
        ok_step = off(rep) <= lab.get("step_tolerance", 0)
        s.right_step += ok_step
        if lab.get("cause"):
            s.with_cause += 1
            s.right_cause += rep.get("top") == lab["cause"]
        s.details.append(f"found {lab['kind']} at {lab['step']} as {rep['kind']} at {rep['step']}"
                         f"{'' if ok_step else ' (step off)'}"
                         + (f", top {rep.get('top')}" + ("" if rep.get("top") == lab["cause"] else
                                                         f" (true {lab['cause']})") if lab.get("cause") else ""))
    for i, r in enumerate(reports):
        if i not in taken:
            s.false += 1
            s.details.append(f"false {r['kind']} of {r.get('metric', 'loss')} at {r['step']}"
                             f" (top {r.get('top')})")
    return s


# --- the sets ---------------------------------------------------------------------------------

def entries(which: str, log=print) -> list[Entry]:
    sets = json.loads((HERE / "sets.json").read_text())[which]
    out: list[Entry] = []
    if sets.get("minigpt"):
        for lab in json.loads((HERE / "labels" / "minigpt.json").read_text())["runs"]:
            out.append(Entry(lab["run"], "minigpt", ROOT / lab["path"], lab))
    sections = set(sets.get("real_runs_sections") or [])
    for lab in json.loads((HERE / "labels" / "real_runs.json").read_text())["runs"]:
        if lab["section"] in sections:
            out.append(Entry(lab["run"], "real", SHARED / lab["path"], lab))
    if sets.get("trainer3"):          # the third trainer's runs: generated (cached) before reading
        import trainer3

        labs = json.loads((HERE / sets["fresh_labels"]).read_text())["runs"]
        if not all((ROOT / lab["path"]).exists() for lab in labs):
            trainer3.generate(write_labels=False, log=log)
    if sets.get("fresh_labels"):      # the fresh sets: their own labels, paths under this repo
        for lab in json.loads((HERE / sets["fresh_labels"]).read_text())["runs"]:
            out.append(Entry(lab["run"], "fresh", ROOT / lab["path"], lab))
    if sets.get("lab2_seeds"):
        import synthetic

        for d in synthetic.generate(sets["lab2_seeds"], log=log):
            out.append(Entry(d.name, "lab2", d, json.loads(synthetic.label_path(d).read_text())))
    return out


def _reports(analysis) -> list[dict]:
    return [{"step": i.step, "segment": i.segment, "kind": i.kind, "metric": i.metric,
             "top": _top(i)} for i in analysis.incidents]


def _top(incident) -> str | None:
    """The first hypothesis, where the run gives it any support: a cause listed first at 0.0 is in
    the catalog's order, not ranked by evidence, so it is no right cause."""
    first = incident.hypotheses[0] if incident.hypotheses else None
    return first.pattern if first is not None and first.score > 0 else None


def evaluate(entry: Entry) -> dict:
    from postmortem.diagnose.analyze import analyze
    from postmortem.diagnose.thresholds import Thresholds
    from postmortem.run import read_run

    labels = entry.label.get("incidents", [])
    try:
        log = read_run(entry.path)
    except Exception as err:       # any failure to read is scored, not raised
        s = match(labels, [])
        return {"run": entry.run, "origin": entry.origin, "read": False,
                "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}", **_score_dict(s)}
    t0 = time.perf_counter()
    try:
        analysis = analyze(log, Thresholds())
    except Exception as err:
        s = match(labels, [])
        return {"run": entry.run, "origin": entry.origin, "read": True,
                "error": f"analyze failed: {type(err).__name__}: {str(err).splitlines()[0][:160]}",
                **_score_dict(s)}
    reports = _reports(analysis)
    s = match(labels, reports)
    seen_restarts = int(log.frame["segment"].max()) if len(log.frame) else 0
    return {"run": entry.run, "origin": entry.origin, "read": True, "format": log.source.format,
            "analyze_s": round(time.perf_counter() - t0, 3), "reports": reports,
            "restarts": entry.label.get("restarts", 0), "restarts_seen": seen_restarts,
            **_score_dict(s)}


def _score_dict(s: Score) -> dict:
    return {"found": s.found, "missed": s.missed, "false": s.false, "right_step": s.right_step,
            "right_cause": s.right_cause, "with_cause": s.with_cause, "optional_found": s.optional_found,
            "details": s.details}


def totals(rows: list[dict]) -> dict:
    keys = ("found", "missed", "false", "right_step", "right_cause", "with_cause", "optional_found")
    out = {}
    for origin in sorted({r["origin"] for r in rows}) + ["all"]:
        sel = [r for r in rows if origin in ("all", r["origin"])]
        t = {k: sum(r[k] for r in sel) for k in keys}
        t["runs"] = len(sel)
        t["unread"] = sum(not r["read"] for r in sel)
        t["controls_clean"] = sum(1 for r in sel if r.get("control") and r["read"] and r["false"] == 0)
        t["controls"] = sum(1 for r in sel if r.get("control"))
        out[origin] = t
    return out


def table(rows: list[dict], tot: dict) -> str:
    lines = [f"{'run':58} {'format':17} {'true':>4} {'found':>5} {'miss':>4} {'false':>5} {'step':>4} "
             f"{'cause':>7}  notes"]
    for r in rows:
        true = r["found"] + r["missed"]
        cause = f"{r['right_cause']}/{r['with_cause']}" if r["with_cause"] else "-"
        note = "NOT READ: " + r["error"] if not r["read"] else r.get("error", "")
        if r.get("restarts") or r.get("restarts_seen"):
            note += f" restarts {r.get('restarts_seen')}/{r.get('restarts')}"
        if r["read"] and r["details"]:
            note += " " + "; ".join(d for d in r["details"] if not d.startswith("found") or "off" in d
                                    or "true" in d)[:150]
        lines.append(f"{r['run'][:58]:58} {r.get('format', '-')[:17]:17} {true:4d} {r['found']:5d} "
                     f"{r['missed']:4d} {r['false']:5d} {r['right_step']:4d} {cause:>7}  {note.strip()}")
    lines.append("")
    lines.append(f"{'totals':10} {'runs':>5} {'unread':>6} {'true':>5} {'found':>5} {'missed':>6} {'false':>5} "
                 f"{'step ok':>7} {'cause ok':>9} {'clean controls':>15}")
    for origin, t in tot.items():
        true = t["found"] + t["missed"]
        lines.append(f"{origin:10} {t['runs']:5d} {t['unread']:6d} {true:5d} {t['found']:5d} {t['missed']:6d} "
                     f"{t['false']:5d} {t['right_step']:7d} {t['right_cause']:4d}/{t['with_cause']:<4d} "
                     f"{t['controls_clean']:8d}/{t['controls']:<6d}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["tuning", "reporting", "fresh", "fresh2", "fresh3", "fresh4", "diverge3"],
                    required=True)
    ap.add_argument("--json", action="store_true", help="also write benchmarks/results/accuracy-<set>.json")
    ap.add_argument("--only", default="", help="score only runs whose name contains this")
    args = ap.parse_args(argv)
    ents = [e for e in entries(args.set, log=lambda m: print(m, file=sys.stderr)) if args.only in e.run]
    rows = []
    for e in ents:
        row = evaluate(e)
        row["control"] = not any(not lab.get("optional") for lab in e.label.get("incidents", []))
        rows.append(row)
    tot = totals(rows)
    print(f"accuracy on the {args.set.upper()} set ({len(rows)} runs)\n")
    print(table(rows, tot))
    if args.json:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"accuracy-{args.set}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"set": args.set, "totals": tot, "runs": rows}, indent=1) + "\n")
        os.replace(tmp, path)
        print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
