"""`postmortem runs STORE`: every run of a store with what `analyze` found, newest first."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from postmortem.cli.options import add_json, command, print_json
from postmortem.errors import UsageError


def _when(start) -> str:
    if start is None:
        return "-"
    return datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d %H:%M")


def cmd_runs(args) -> int:
    from postmortem.scan import scan
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: needs 1 or more")
    rows, figures = scan(args.store, jobs=args.jobs, use_cache=not args.no_cache)
    print(f"{figures['runs']} runs: {figures['analyzed']} analyzed on {figures['workers']} worker(s), "
          f"{figures['cached']} from the cache, in {figures['seconds']:.1f} s", file=sys.stderr)
    if args.json:
        print_json({"store": args.store, "runs": [
            {**{k: v for k, v in r.items() if k != "start"}, "start": _when(r["start"]) if r["start"] else None}
            for r in rows]})
        return 0
    width = max([len(r["id"]) for r in rows] + [2])
    # a tracker's ids are opaque (32 hex): its runs' names, where the store keeps them, beside
    named = max([len(r.get("name") or "") for r in rows] + [0])
    names = min(max(named, 4), 30)
    print(f"{'ID':<{width}}  " + (f"{'NAME':<{names}}  " if named else "")
          + f"{'START':16}  {'STEPS':>7}  {'STATUS':9}  FOUND")
    for r in rows:
        if r.get("error"):
            found = f"unreadable: {r['error']}"
        elif not r.get("incidents"):
            found = "no incident"
        else:
            found = (f"{r['incidents']} incident(s); {r['kind']} at step {r['step']}, "
                     f"likely {r['top_cause'] or '-'}")
        steps = "?" if r.get("steps") is None else r["steps"]
        name = f"{(r.get('name') or '-')[:names]:<{names}}  " if named else ""
        print(f"{r['id']:<{width}}  {name}{_when(r['start']):16}  {steps:>7}  {(r.get('status') or '-'):9}  {found}")
    return 0


def register(sub) -> None:
    p = command(sub, "runs", "every run of a store with what analyze found, newest first",
                "Every run of a store (mlruns/, mlflow.db, an MLflow server's http://host:port,\n"
                "lightning_logs/, a TensorBoard logdir, wandb/, a work dir, a folder of logs), each\n"
                "read and analyzed in parallel worker processes: its incidents, the worst one's kind\n"
                "and step, its most likely cause. Each run's result is cached (by its files' sizes and\n"
                "times) in $XDG_CACHE_HOME/postmortem/, so a second scan reads only what changed.",
                ("postmortem runs mlruns/",
                 "postmortem runs http://127.0.0.1:5000 --json | jq '.runs[] | select(.incidents > 0)'",
                 "postmortem runs lightning_logs/ --jobs 4 --no-cache   # every run analyzed again"))
    p.add_argument("store", metavar="STORE", help="a store of runs, or an MLflow server's URI")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one a core)")
    p.add_argument("--no-cache", action="store_true", help="analyze every run again, ignoring the cache")
    add_json(p, "one row a run")
    p.set_defaults(func=cmd_runs)
