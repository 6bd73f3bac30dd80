"""Human output of `info` and `analyze`, sized for a 100-column terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from postmortem.diagnose.models import Analysis

FULL = 5        # incidents shown in full when there are more
LISTED = 100    # incidents listed a line each


def _console() -> Console:
    return Console(width=min(100, Console().width), highlight=False)


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
        con.print(f"  [dim]{f}[/]")
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
        table.add_row(m["name"][:40], str(m["count"]),
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
    for fact, f in (data.get("facts") or {}).items():
        con.print(f"[bold]{fact}[/] {f['value']}  [dim]({f['from']})[/]")


def _path(checks) -> str:
    marks = {"pass": "[green]ok[/]", "fail": "[red]x[/]", "skipped": "[dim]-[/]"}
    out = []
    for c in checks:
        leaf = f"[red]->{c.leaf}[/]" if c.status == "fail" and c.leaf else ""
        out.append(f"{c.id}{marks[c.status]}{leaf}")
    return " ".join(out)


def print_analysis(result: Analysis, top: int = 4) -> None:
    con = _console()
    run = result.run
    con.print(f"[bold]{run.id}[/]  {run.format}  {run.steps} steps  dtype {run.dtype or 'unknown'}")
    con.print("[bold]path[/]  " + _path(result.checks))
    for c in result.checks:
        if c.status == "fail":
            con.print(f"  [red]{c.id}[/] {c.question} [dim]{c.detail}[/]")
    if not result.incidents:
        con.print("[green]no incident[/]: no NaN, no spike, no divergence")
        return
    incidents = result.incidents
    full = incidents
    if len(incidents) > FULL:
        # many: the ones that matter most in full (by severity), every one on a line (by step)
        full = sorted(incidents, key=lambda i: i.priority(), reverse=True)[:FULL]
        con.print(f"[bold]{len(incidents)} incidents[/]; the {FULL} largest in full below")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("#", "kind", "metric", "step", "peak", "rise", "top cause"):
            table.add_column(col, justify="right" if col in ("#", "step", "peak", "rise") else "left")
        for n, inc in enumerate(incidents[:LISTED], 1):
            peak = inc.symptoms.peak_loss if inc.metric == "loss" else None
            table.add_row(str(n), inc.kind, inc.metric, str(inc.step), _num(peak),
                          f"x{inc.rise:.2f}" if inc.rise else "-",
                          inc.hypotheses[0].pattern if inc.hypotheses and inc.hypotheses[0].score > 0 else "-")
        con.print(table)
        if len(incidents) > LISTED:
            con.print(f"... {len(incidents) - LISTED} more (--json has them all)")
    else:
        full = sorted(incidents, key=lambda i: i.priority(), reverse=True)    # the headline first
        con.print(f"[bold]{len(incidents)} incident(s)[/]")
    for inc in full:
        n = incidents.index(inc) + 1
        where = f"segment {inc.segment}, " if inc.segment else ""
        conf = " [yellow](low confidence)[/]" if inc.confidence == "low" else ""
        rise = f", x{inc.rise:.2f} over the level before" if inc.rise else ""
        con.print(f"\n[bold]{n}. {inc.kind}[/] of {inc.metric} at step {inc.step} ({where}"
                  f"{len(inc.related)} related{rise}){conf}")
        sym = inc.symptoms.model_dump()
        con.print("   " + "  ".join(f"{k}={_num(v)}" for k, v in sym.items() if v is not None))
        shown = [h for h in inc.hypotheses[:top] if h.score > 0]     # a 0 is not a cause
        if not shown:
            con.print("   [yellow]no convincing cause[/]: no hypothesis has support in the logged numbers")
        for h in shown:
            con.print(f"   {h.rank}. [bold]{h.pattern}[/] {h.score:.2f}")
            for o in h.supported_by[:3]:
                con.print(f"      [green]+[/] {escape(f'[{o.panel}]')} {escape(o.observation)}")
            for o in h.contradicted_by[:2]:
                con.print(f"      [red]-[/] {escape(f'[{o.panel}]')} {escape(o.observation)}")
        if shown:
            con.print(f"   next: {shown[0].discriminate}")
