"""Human output of `info` and `analyze`: sized for a terminal up to 100 columns; in a pipe plain
lines, never wrapped or cut, whatever COLUMNS says (a grep or a log keeps each line whole)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from postmortem.diagnose.models import Analysis

FULL = 5        # incidents shown in full when there are more
# the order incidents are shown in full (Incident.priority)
ORDER = "a NaN loss first, then any other NaN, then by severity, warmup blips last"
LISTED = 100    # incidents listed a line each


# Each check in the words of the checklists (postmortem/diagnose/trees.py asks the questions).
CHECKLISTS = {"A": "checklist A, did the run start right", "B": "checklist B, how it trained"}
CHECK_NAMES = {
    "A1": "start loss", "A2": "first grad norm", "A3": "LR schedule applies", "A4": "warmup",
    "A4.1": "LR decay", "A5": "grad norm alive and not always clipped", "A6": "loss moves early",
    "A7": "val-train gap", "A8": "weight norms early", "A9": "Adam moments",
    "B0": "restart", "B1": "NaN or Inf", "B1.1": "dtype of the NaN", "B2": "loss spike",
    "B2.1": "spike recovered", "B2.2": "grad-norm spike", "B3": "loss-scale cascade",
    "B4": "slow divergence", "B4.1": "LR rising", "B4.2": "weight norms", "B4.3": "grad norm trend",
}
WIDTH = 100     # the layout's lines, in a terminal and in a pipe alike


def _console() -> Console:
    here = Console(highlight=False)
    if here.is_terminal:
        return Console(width=min(WIDTH, here.width), highlight=False)
    # a pipe: no wrap, no ellipsis; tables as wide as their cells
    return Console(width=1 << 20, highlight=False, soft_wrap=True, no_color=True)


def _cut(text: str, con: Console, n: int = 40) -> str:
    """A long name cut to `n` in a terminal's table column; whole in a pipe."""
    return text if not con.is_terminal or len(text) <= n else text[:n - 1] + "…"


def _severity(inc) -> str:
    """How far the incident stands out of its series' own noise (diagnose: Event.severity)."""
    return "-" if inc.severity is None else f"{inc.severity:.1f}"


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def print_info(data: dict) -> None:
    con = _console()
    run, steps = data["run"], data["steps"]
    con.print(f"[bold]{run['id']}[/]  {run['format']}  dtype {run['dtype'] or 'unknown'}")
    for f in run["files"][:5]:
        con.print(f"  [dim]{escape(str(f))}[/]")
    if len(run["files"]) > 5:
        con.print(f"  [dim]... {len(run['files']) - 5} more files[/]")
    segs = data["segments"]
    con.print(f"{steps['rows']} rows, steps {steps['first']}..{steps['last']}, "
              f"{len(segs)} segment{'s' if len(segs) != 1 else ''}")
    if len(segs) > 1:
        for s in segs[:10]:
            con.print(f"  segment {s['segment']}: steps {s['first_step']}..{s['last_step']} "
                      f"({s['rows']} rows)")
    _print_read(con, data)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("metric", "count", "NaN", "Inf", "steps", "min", "max"):
        table.add_column(col, justify="left" if col in ("metric", "steps") else "right")
    for m in data["metrics"]:
        table.add_row(escape(_cut(m["name"], con)), str(m["count"]),
                      f"[red]{m['nan']}[/]" if m["nan"] else "0",
                      f"[red]{m.get('inf', 0)}[/]" if m.get("inf") else "0",
                      f"{m.get('first_step', '-')}..{m.get('last_step', '-')}",
                      _num(m.get("min")), _num(m.get("max")))
    con.print(table)
    for w in data["warnings"]:
        con.print(f"[yellow]warning:[/] {w}")


def _print_read(con, data: dict) -> None:
    """Which columns are the step and the loss, and where each configured fact came from."""
    read = data.get("read") or {}
    for what in ("step", "loss", "val_loss"):
        if read.get(what) and read[what] != what:
            con.print(f"[bold]{what}[/] from {read[what]}")
    for m in data.get("metrics") or []:
        if m.get("dialect"):
            con.print(f"[bold]{m['name']}[/] from the lines of {', '.join(m['dialect'])}")
    for what in ("events", "segments"):
        if read.get(what):
            con.print(f"[dim]{read[what]}[/]")
    for what, said in (("resumes", "resumed"), ("checkpoints", "checkpoint loads"), ("evals", "evaluations")):
        if read.get(what):
            con.print(f"[bold]{said}[/] {escape(_events_said(read[what]))}")
    for fact, f in (data.get("facts") or {}).items():
        con.print(f"[bold]{fact}[/] {f['value']}  [dim]({f['from']})[/]")


def _events_said(events: list[dict], shown: int = 5) -> str:
    """`N at step S (dialect), ...`: the first few of the events a reader kept, and how many more."""
    said = ", ".join(f"step {e['step']} ({e['dialect']})" for e in events[:shown])
    more = f" and {len(events) - shown} more" if len(events) > shown else ""
    return f"{len(events)}: {said}{more}"


def _items(prefix: str, items: list[str], width: int = WIDTH) -> list[str]:
    """`prefix item, item, ...` laid out in lines of at most `width` at the commas (a name is
    never cut), the lines after the first indented under the first item."""
    lines, line = [], prefix
    for n, item in enumerate(items):
        piece = item + (", " if n < len(items) - 1 else "")
        if len(line) + len(piece.rstrip()) > width and line != prefix:
            lines.append(line.rstrip())
            line = " " * len(prefix)
        line += piece
    return lines + [line.rstrip()]


def _named(c) -> str:
    return f"{c.id} {CHECK_NAMES.get(c.id, '')}".rstrip()


def print_checklists(con, checks) -> None:
    """Each checklist in words: what it found (each with the pattern it points to, its question
    and what was seen), then what was ok and what was skipped, by name."""
    for tree, title in CHECKLISTS.items():
        mine = [c for c in checks if c.id.startswith(tree)]
        if not mine:
            continue
        found = [c for c in mine if c.status == "fail"]
        ok = [c for c in mine if c.status == "pass"]
        skipped = [c for c in mine if c.status == "skipped"]
        if len(ok) == len(mine):
            con.print(f"[bold]{title}[/]: all {len(mine)} checks ok")
            continue
        counts = ", ".join(f"{len(group)} {word}" for group, word in
                           ((found, "found a problem"), (ok, "ok"), (skipped, "skipped")) if group)
        con.print(f"[bold]{title}[/]: {counts}")
        for c in found:
            leaf = f", points to [bold]{c.leaf}[/]" if c.leaf else ""
            con.print(f"  [red]found[/] {escape(_named(c))}{leaf}: {escape(c.detail)}")
            con.print(f"        [dim]{escape(c.question)}[/]")
        for word, group in (("ok", ok), ("skipped", skipped)):
            if group:
                for line in _items(f"  {word}: ", [_named(c) for c in group], min(WIDTH, con.width)):
                    con.print(escape(line), style="dim" if word == "skipped" else None)


def print_analysis(result: Analysis, top: int = 4) -> None:
    con = _console()
    run = result.run
    con.print(f"[bold]{run.id}[/]  {run.format}  {run.steps} steps  dtype {run.dtype or 'unknown'}")
    for w in run.warnings:
        con.print(f"[yellow]warning:[/] {escape(w)}")
    print_checklists(con, result.checks)
    if not result.incidents:
        if "loss" in run.metrics:
            con.print("[green]no incident[/]: no NaN, no spike, no divergence")
        else:      # nothing judged the loss: not an all-clear
            con.print("[yellow]no incident in what was read, but no loss was read[/]: a loss spike, a "
                      "NaN loss or a divergence could not be looked for (--loss COLUMN names it)")
        return
    incidents = result.incidents
    full = incidents
    if len(incidents) > FULL:
        # many: the ones that matter most in full (by severity), every one on a line (by step)
        full = sorted(incidents, key=lambda i: i.priority(), reverse=True)[:FULL]
        con.print(f"[bold]{len(incidents)} incidents[/]; the {FULL} that matter most in full below "
                  f"({ORDER}): {', '.join(f'#{incidents.index(i) + 1}' for i in full)}")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "kind", "metric", "step", "peak", "rise", "severity", "top cause"):
            table.add_column(col, justify="right" if col in ("#", "step", "peak", "rise", "severity") else "left")
        for n, inc in enumerate(incidents[:LISTED], 1):
            peak = inc.symptoms.peak_loss if inc.metric == "loss" else None
            table.add_row(str(n), inc.shown_kind, inc.metric, str(inc.step), _num(peak),
                          f"x{inc.rise:.2f}" if inc.rise else "-", _severity(inc),
                          inc.hypotheses[0].pattern if inc.hypotheses and inc.hypotheses[0].score > 0 else "-")
        con.print(table)
        if len(incidents) > LISTED:
            con.print(f"... {len(incidents) - LISTED} more (--json has them all)")
    else:
        full = sorted(incidents, key=lambda i: i.priority(), reverse=True)    # the headline first
        order = f", {ORDER}" if len(incidents) > 1 else ""
        con.print(f"[bold]{len(incidents)} incident(s)[/]{order}")
    for inc in full:
        n = incidents.index(inc) + 1
        where = f"segment {inc.segment}, " if inc.segment else ""
        conf = " [yellow](low confidence)[/]" if inc.confidence == "low" else ""
        rise = f", x{inc.rise:.2f} over the level before" if inc.rise else ""
        severity = f", severity {_severity(inc)}" if inc.severity is not None else ""
        con.print(f"\n[bold]{n}. {inc.shown_kind}[/] of {inc.metric} at step {inc.step} ({where}"
                  f"{len(inc.related)} related{rise}{severity}){conf}")
        sym = inc.symptoms.model_dump()
        for line in _items("   ", [f"{k}={_num(v)}" for k, v in sym.items() if v is not None],
                          min(WIDTH, con.width)):
            con.print(escape(line))
        shown = [h for h in inc.hypotheses[:top] if h.score > 0]     # a 0 is not a cause
        if not shown:
            con.print("   [yellow]no convincing cause[/]: " + escape(inc.no_cause or "no hypothesis has support in the logged numbers"))
        for h in shown:
            con.print(f"   {h.rank}. [bold]{h.pattern}[/] {h.score:.2f}")
            for o in h.supported_by[:3]:
                con.print(f"      [green]+[/] {escape(f'[{o.panel}]')} {escape(o.observation)}")
            for o in h.contradicted_by[:2]:
                con.print(f"      [red]-[/] {escape(f'[{o.panel}]')} {escape(o.observation)}")
        if shown:
            con.print(f"   next: {shown[0].discriminate}")
