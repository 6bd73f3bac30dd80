"""The commands of the post-mortem and the knowledge base: new, check, commit, lessons,
similar, verify."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from postmortem.cli.options import add_against, add_columns, read_options
from postmortem.errors import DocumentError, IncidentError, KBError


def _doc(path: str):
    from postmortem.document.markdown import read
    try:
        return read(path)
    except DocumentError as err:
        raise DocumentError(f"{path}: {err}") from None


def cmd_new(args) -> int:
    from postmortem.document.draft import draft
    from postmortem.document.markdown import render
    from postmortem.kb.lessons import check_learner
    from postmortem.run import read_run
    try:
        check_learner(args.learner)
    except KBError as err:
        raise KBError(f"{args.learner}: {err}") from None
    log = read_run(args.run, **read_options(args))
    against = [read_run(other) for other in args.against or []]
    if args.replay:
        # the replay runs here, and the document is handed its result
        from postmortem.diagnose.analyze import analyze
        from postmortem.document.draft import pick_incident
        from postmortem.replay.engine import Replayer
        incidents = analyze(log, against=against).incidents
        inc = pick_incident(incidents, args.step, log.source.path)
        done = Replayer(log, inc, "cpu").replay()
        pm = draft(log, args.learner, inc.step, incidents=[inc], replayed=done)
    else:
        pm = draft(log, args.learner, args.step, against=against)
    out = Path(args.output or pm.filename)
    if out.exists() and not args.force:
        raise DocumentError(f"{out}: exists; --force overwrites it")
    from postmortem.files import atomic_write
    atomic_write(out, render(pm))
    print(f"wrote {out}: {pm.incident} at step {pm.spike_step}, "
          f"{len(pm.hypotheses)} hypotheses; fill sections 3-7, then `postmortem check {out}`",
          file=sys.stderr)
    return 0


def _problems(path: str, run: str | None):
    from postmortem.document.lint import check_text
    pm = _doc(path)
    log = None
    if run:
        from postmortem.run import read_run
        log = read_run(run)
    return pm, check_text(Path(path).read_text(encoding="utf-8"), pm, log)


def cmd_check(args) -> int:
    _, problems = _problems(args.file, args.run)
    if args.json:
        print(json.dumps({"ok": not problems, "problems": [
            {"section": p.section, "problem": p.problem} for p in problems]}, indent=2))
    else:
        for p in problems:
            print(p)
        if not problems:
            print(f"{args.file}: complete" + (" and true to the run" if args.run else ""))
    return 1 if problems else 0


def cmd_commit(args) -> int:
    import git

    from postmortem.kb.repo import commit
    run = args.run
    pm, problems = _problems(args.file, run)
    if problems:
        for p in problems:
            print(p)
        print(f"postmortem: not committed: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    pm.learner = args.learner
    from postmortem.document.markdown import render
    try:
        done = commit(pm, render(pm), args.learner, Path(args.repo or "."), args.amend, args.init)
    except KBError as err:
        raise KBError(f"{args.file}: {err}") from None
    except git.GitCommandError as err:
        raise KBError(f"{args.file}: git: {(err.stderr or str(err)).strip().splitlines()[-1]}") from None
    print(f"committed {done.sha[:10]}: {done.postmortem.name} and {done.lessons.name}")
    for note in done.notes:
        print(f"  {note}")
    return 0


def cmd_lessons(args) -> int:
    from postmortem.kb.lessons import group_by_pattern, query, read_all
    from postmortem.kb.repo import kb_root
    root = kb_root(Path(args.repo or "."))
    # the TUI's filter, spelled as options: pattern:X learner:Y and free text
    asked = " ".join(x for x in (args.pattern and f"pattern:{args.pattern}",
                                 args.learner and f"learner:{args.learner}", args.search) if x)
    rows = query(read_all(root), asked)
    groups = group_by_pattern(rows)
    if args.json:
        print(json.dumps({"count": len(rows), "patterns": [
            {"pattern": p, "count": len(g), "lessons": [
                {**r.to_dict(), "postmortem": f"learners/{r.learner}/{r.link}"} for r in g]}
            for p, g in groups]}, indent=2))
        return 0
    if not rows:
        print("no lessons" + (" match" if asked.strip() else " yet"))
    for pattern, group in groups:
        print(f"{pattern} ({len(group)})")
        for r in group:
            print(f"  {r.date}  {r.learner}  {r.run_id}: {r.lesson}  -> learners/{r.learner}/{r.link}")
    return 0


def cmd_similar(args) -> int:
    from postmortem.kb.repo import kb_root
    from postmortem.kb.similar import find_similar, of_document
    root = kb_root(Path(args.repo or "."))
    target = Path(args.target)
    if target.suffix == ".md" and target.is_file():
        own = _doc(args.target)
        sig = of_document(own)
    else:
        from postmortem.diagnose.signature import of_run
        from postmortem.run import read_run
        own, sig = None, of_run(read_run(target))
        if sig.peak_ratio is None and sig.recovery is None:
            raise IncidentError(f"{target}: no incident to compare")
    matches = find_similar(root, sig, skip=lambda pm: own is not None and pm.run_id == own.run_id
                           and pm.date == own.date)[:args.top]
    if args.json:
        print(json.dumps([{"score": round(m.score, 3), "postmortem": str(m.path), "run_id": m.pm.run_id,
                           "pattern": m.pm.pattern, "why": m.why} for m in matches], indent=2))
        return 0
    if not matches:
        print("no past post-mortems under learners/")
    for m in matches:
        print(f"{m.score:.2f}  {m.path}  ({m.pm.run_id}, {m.pm.pattern})")
        for w in m.why:
            print(f"      {w}")
    return 0


def cmd_verify(args) -> int:
    from postmortem.document.verify import verify
    from postmortem.run import read_run
    pm = _doc(args.file)
    baseline = args.baseline or pm.run
    base_log = read_run(baseline) if baseline and Path(baseline).exists() else None
    outcomes = verify(pm, read_run(args.run), base_log)
    if not outcomes:
        raise DocumentError(f"{args.file}: the Verification section has nothing to check")
    for o in outcomes:
        print(f"{'pass' if o.ok else 'FAIL'}  {o.expectation}  [{o.measured}]")
    return 0 if all(o.ok for o in outcomes) else 1


def register(sub) -> None:
    p = sub.add_parser("new", help="write a draft post-mortem from the diagnosis")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--learner", required=True)
    p.add_argument("--step", type=int, help="the incident nearest this step (default: the largest, "
                                            "the one the dashboard opens on)")
    p.add_argument("-o", "--output", metavar="FILE")
    p.add_argument("--format")
    add_columns(p, step_flag=False)         # --step here is the incident's step
    p.add_argument("--force", action="store_true", help="overwrite FILE")
    p.add_argument("--replay", action="store_true",
                   help="replay the incident first and fill section 3 with its evidence")
    add_against(p)
    p.set_defaults(func=cmd_new)
    p = sub.add_parser("check", help="lint a post-mortem: complete, true to the run, argued")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--run", help="recompute the Symptoms from this run and compare")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("commit", help="check, write learners/<name>/..., append the lesson, git commit")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--learner", required=True)
    p.add_argument("--run", help="check the Symptoms against this run first")
    p.add_argument("--repo", help="the knowledge-base repository (default: the one you stand in)")
    p.add_argument("--amend", action="store_true", help="replace the post-mortem of the same run and date")
    p.add_argument("--init", action="store_true", help="make a git repository here if there is none")
    p.set_defaults(func=cmd_commit)
    p = sub.add_parser("lessons", help="lessons across learners, grouped by pattern")
    p.add_argument("--pattern")
    p.add_argument("--learner")
    p.add_argument("--search", metavar="TEXT")
    p.add_argument("--repo")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lessons)
    p = sub.add_parser("similar", help="past post-mortems closest to a run or a post-mortem")
    p.add_argument("target", metavar="RUN|FILE")
    p.add_argument("--repo")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_similar)
    p = sub.add_parser("verify", help="check the Verification section against a re-run")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--run", required=True, metavar="NEWRUN")
    p.add_argument("--baseline", help="the original run (default: the document's `run`)")
    p.set_defaults(func=cmd_verify)
