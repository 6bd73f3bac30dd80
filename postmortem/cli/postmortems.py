"""The commands of the post-mortem and the knowledge base: new, check, commit, lessons,
similar, verify."""

from __future__ import annotations

import sys
from pathlib import Path

from postmortem.cli.options import (
    add_against,
    add_columns,
    add_format,
    add_json,
    add_learner,
    add_repo,
    add_run_id,
    command,
    print_json,
    read_options,
)
from postmortem.cli.progress import ArmSteps, phase, say, size_of
from postmortem.errors import DocumentError, IncidentError, KBError, RunReadError, UserError

NOT_CHECKED = "not checked against the run"     # what a commit told --no-run-check records


def _doc(path: str):
    """The post-mortem at `path` (its errors name the file, once)."""
    from postmortem.document.markdown import read
    return read(path)


def _learner(name: str | None) -> str | None:
    """A learner name as typed, refused in one line (exit 2) by every command that takes one
    unless it is a plain name: it becomes the folder learners/NAME/."""
    from postmortem.kb.lessons import check_learner
    return None if name is None else check_learner(name)


def _settings(args):
    """The knowledge base and the learner in force (kb.settings: flag, variable, config file)."""
    from postmortem.kb.settings import resolve
    return resolve(getattr(args, "kb", None), _learner(getattr(args, "learner", None)))


def _learner_needed(settings) -> str:
    if settings.learner is None:
        raise KBError("who is writing? --learner NAME, or once for all: postmortem init --learner NAME")
    return settings.learner


def _problem_list(problems) -> list[dict]:
    return [{"section": p.section, "problem": p.problem} for p in problems]


def cmd_new(args) -> int:
    from postmortem.document.draft import draft
    from postmortem.document.markdown import render
    from postmortem.run import read_run
    learner = _learner_needed(_settings(args))
    with phase(f"reading and analyzing {args.run}", in_pipe=False, read_bytes=size_of(args.run)):
        log = read_run(args.run, **read_options(args))
        against = [read_run(other) for other in args.against or []]
        inc = incident_near(log, args.step, against)
    done = None
    pm = draft(log, learner, inc.step, incidents=[inc])
    out = Path(args.output or pm.filename)
    if out.exists() and not args.force:     # refused before a replay of minutes, not after it
        raise DocumentError(f"{out}: exists; --force overwrites it")
    if args.replay:
        # the replay runs here, and the document is handed its result
        from postmortem.replay.engine import Replayer
        with ArmSteps(f"replaying the {inc.kind} at step {inc.step} on cpu, faithful first") as progress:
            done = Replayer(log, inc, "cpu", progress).replay()
        say(f"replayed {progress.done()}")
        pm = draft(log, learner, inc.step, incidents=[inc], replayed=done)
    from postmortem.document.runpath import stored
    pm = pm.model_copy(update={"run": stored(args.run, out)})     # found again from anywhere
    from postmortem.files import atomic_write
    with phase(f"drawing the figure beside {out}", in_pipe=args.replay):
        pm = _with_figure(pm, out, log, done)
    atomic_write(out, render(pm))
    shown = f" and its figure {out.with_name(pm.figure)}" if pm.figure else ""
    print(f"wrote {out}{shown}: {pm.incident} at step {pm.spike_step}, "
          f"{len(pm.hypotheses)} hypotheses; fill sections 3-7, then `postmortem check {out}`",
          file=sys.stderr)
    if args.json:
        print_json({"wrote": str(out), "run_id": pm.run_id, "run_in_store": pm.run_in_store,
               "incident": pm.incident, "step": pm.spike_step,
               "hypotheses": [h.pattern for h in pm.hypotheses],
               "figure": str(out.with_name(pm.figure)) if pm.figure else None})
    return 0


def incident_near(log, step: int | None, against: list | None = None, path: str | None = None):
    """The incident nearest --step (the largest without one), said on stderr when it is not
    at the step asked (`new` and `replay`); `path`: the run as named in a refusal."""
    from postmortem.diagnose.analyze import analyze
    from postmortem.document.draft import nearest_note, pick_incident
    incidents = analyze(log, against=against or []).incidents
    inc = pick_incident(incidents, step, path or log.source.path)
    note = nearest_note(incidents, step, inc)
    if note:
        print(f"postmortem: {note}", file=sys.stderr)
    return inc


def _with_figure(pm, out: Path, log, replayed=None):
    """The figure drawn beside the document (its name, as a PNG) and shown by it; without
    matplotlib one line says so and the document goes without."""
    from postmortem.document import figure
    from postmortem.files import safe_name
    path = out.with_name(safe_name(out.stem) + ".png")
    try:
        figure.write(path, log, pm.spike_step, replayed, pm.incident)
    except DocumentError as err:
        print(f"postmortem: no figure: {err}", file=sys.stderr)
        return pm.model_copy(update={"figure": None})
    return pm.model_copy(update={"figure": path.name})


def _figure_to_commit(path: str, pm, log, found) -> bytes | None:
    """The PNG the document shows (the check found it beside the document); a document that
    shows none gets one drawn from its run (`log`: the run as the check read it; else read
    from `found`, where the run is, with --no-run-check) when the run and matplotlib are at hand."""
    if pm.figure:
        return (Path(path).parent / pm.figure).read_bytes()
    if log is None and found is None:
        return None
    from postmortem.document import figure
    from postmortem.document.runpath import read
    try:
        run = log if log is not None else read(found, pm.run_in_store)
        return figure.png(run, pm.spike_step, None, pm.incident)
    except UserError as err:
        print(f"postmortem: committed without a figure: {err}", file=sys.stderr)
        return None


def run_to_check(path: str, pm, given: str | None, unchecked: bool):
    """(the run whose numbers the Symptoms are compared with, or None; the problem when it
    cannot be found): --run, else the front matter's `run`, found as `verify` finds it."""
    from postmortem.document.lint import Problem, listed
    from postmortem.document.runpath import locate
    if given or unchecked:
        return (Path(given) if given else None), None
    ways = "--run RUN names it, or --no-run-check goes without the comparison"
    if not pm.run:
        return None, Problem("Symptoms", f"numbers not checked: the document names no run "
                                         f"(front matter `run`); {ways}")
    found, tried = locate(pm.run, path)
    if found is None:
        return None, Problem("Symptoms", f"numbers not checked: front matter `run: {pm.run}` is not at "
                                         f"{listed([str(p) for p in tried])}; {ways}")
    return found, None


def _problems(path: str, given: str | None, unchecked: bool = False):
    """(the document, its problems, the run its numbers were compared with or None, and that
    run's RunLog or None). A run inside a store is read by its id there (`run_in_store`); a
    store that no longer holds it is a problem, as a run that is nowhere is."""
    from postmortem.document.lint import Problem, check_text
    from postmortem.document.runpath import RunGone, read
    pm = _doc(path)
    run, missing = run_to_check(path, pm, given, unchecked)
    log = None
    if run is not None:
        try:
            log = read(run, pm.run_in_store, given=bool(given))
        except RunGone as err:
            run, missing = None, Problem("Symptoms", f"numbers not checked: {err}; --run RUN names "
                                                     "it, or --no-run-check goes without the comparison")
    problems = check_text(Path(path).read_text(encoding="utf-8"), pm, log, where=Path(path).parent)
    return pm, ([missing] if missing else []) + problems, run, log


def cmd_check(args) -> int:
    _, problems, run, log = _problems(args.file, args.run, args.no_run_check)
    if args.json:
        print_json({"ok": not problems, "problems": _problem_list(problems),
               "run": str(run) if run is not None else None, "run_in_store": _picked(log)})
    else:
        for p in problems:
            print(p)
        if not problems:
            print(f"{args.file}: complete" + (f" and true to the run {_shown(run, log)}" if run is not None
                                               else f"; numbers {NOT_CHECKED} (--no-run-check)"))
    return 1 if problems else 0


def cmd_commit(args) -> int:
    import git

    from postmortem.kb.commit import commit
    settings = _settings(args)
    pm, problems, run, log = _problems(args.file, args.run, args.no_run_check)
    learner = args.learner and settings.learner or pm.learner or _learner_needed(settings)
    _refuse_another_learner(args.file, pm, learner)
    root = _kb_to_write(settings)
    if problems:
        if args.json:
            print_json({"committed": False, "problems": _problem_list(problems)})
        else:
            for p in problems:
                print(p)
        print(f"postmortem: not committed: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    pm.learner = learner
    from postmortem.document.runpath import locate
    from postmortem.kb.commit import run_as_committed
    found = run or locate(pm.run, args.file)[0]          # the run the draft names, found once
    pm.run = run_as_committed(pm, learner, root, found)
    if log is not None:                 # the store's id as it was read (none: a run of its own)
        pm.run_in_store = _picked(log)
    from postmortem.document.markdown import render
    figure = _figure_to_commit(args.file, pm, log, found)
    pm = pm.model_copy(update={"figure": pm.figure_filename if figure else None,
                               "numbers": NOT_CHECKED if run is None else None})
    try:
        done = commit(pm, render(pm), learner, root, args.amend, args.init, figure)
    except KBError as err:
        raise KBError(f"{args.file}: {err}") from None
    except git.GitCommandError as err:
        raise KBError(f"{args.file}: git: {(err.stderr or str(err)).strip().splitlines()[-1]}") from None
    if args.json:
        print_json({"committed": True, "sha": done.sha, "postmortem": str(done.postmortem),
               "lessons": str(done.lessons), "figure": str(done.figure) if done.figure else None,
               "notes": list(done.notes)})
        return 0
    shown = f", {done.figure.name}" if done.figure else ""
    print(f"committed {done.sha[:10]}: {done.postmortem.name}{shown} and {done.lessons.name}")
    for note in done.notes:
        print(f"  {note}")
    return 0


def _picked(log) -> str | None:
    """The id of the run read inside its store, or None (a run with a path of its own)."""
    return None if log is None else log.source.extras.get("store_run")


def _shown(run, log) -> str:
    """The run as a message names it: `STORE --run ID` for a run inside a store."""
    return f"{run} --run {_picked(log)}" if _picked(log) else str(run)


def _kb_to_write(settings) -> Path:
    """The knowledge base a commit goes to: the one named, else the repository you stand in,
    but never postmortem's own checkout unless it is named (--kb)."""
    from postmortem.kb.settings import is_own_checkout
    if not settings.chosen and is_own_checkout(settings.kb):
        raise KBError(f"{settings.kb} is postmortem's own checkout, not a knowledge base: "
                      "`postmortem init --kb DIR` names yours once (or --kb DIR, or POSTMORTEM_KB)")
    return settings.kb


def _refuse_another_learner(path: str, pm, learner: str) -> None:
    """A draft is committed as its own learner's: --learner names the same one (a draft
    without one takes it). Another name is refused, never moved silently to their folder."""
    if pm.learner and pm.learner != learner:
        raise KBError(f"{path}: the draft belongs to {pm.learner} (front matter `learner: {pm.learner}`); "
                      f"commit it with --learner {pm.learner}, or change `learner:` in it to {learner}")


def cmd_lessons(args) -> int:
    from postmortem.kb.commit import kb_root
    from postmortem.kb.lessons import group_by_pattern, query, read_all
    _learner(args.learner)
    from postmortem.kb.settings import resolve
    root = kb_root(resolve(args.kb).kb)        # --learner here filters; it names no one
    # the TUI's filter, spelled as options: pattern:X learner:Y and free text
    asked = " ".join(x for x in (args.pattern and f"pattern:{args.pattern}",
                                 args.learner and f"learner:{args.learner}", args.search) if x)
    rows = query(read_all(root), asked)
    groups = group_by_pattern(rows)
    if args.json:
        print_json({"count": len(rows), "patterns": [
            {"pattern": p, "count": len(g), "lessons": [
                {**r.to_dict(), "postmortem": f"learners/{r.learner}/{r.link}"} for r in g]}
            for p, g in groups]}, allow_nan=True)
        return 0
    if not rows:
        print("no lessons" + (" match" if asked.strip() else " yet"))
    for pattern, group in groups:
        print(f"{pattern} ({len(group)})")
        for r in group:
            print(f"  {r.date}  {r.learner}  {r.run_id}: {r.lesson}  -> learners/{r.learner}/{r.link}")
    return 0


def _none_similar(root: Path, skip) -> str:
    """Why `similar` lists nothing: no post-mortem in the knowledge base, or only this
    incident's own (left out), said with the folder read, so a user who just committed it is
    not told there is none."""
    from postmortem.document.lint import listed
    from postmortem.kb.similar import past_postmortems
    own = [path for path, pm in past_postmortems(root) if skip(pm)]
    if own:
        return (f"no other post-mortem under {root / 'learners'} (this incident's own is left out: "
                f"{listed([str(p) for p in own])})")
    return f"no post-mortem under {root / 'learners'} yet"


def cmd_similar(args) -> int:
    from postmortem.kb.commit import kb_root
    from postmortem.kb.similar import find_similar, of_document, this_incident
    root = kb_root(_settings(args).kb)
    target = Path(args.target)
    if target.suffix == ".md" and target.is_file():
        own = _doc(args.target)
        sig, skip = of_document(own), this_incident(own.run_id, own.spike_step)
    else:
        from postmortem.diagnose.analyze import analyze
        from postmortem.diagnose.models import worst
        from postmortem.diagnose.signature import of_incident
        from postmortem.document.runpath import run_id_of
        from postmortem.run import read_run
        log = read_run(target, run=args.run_id)
        incidents = analyze(log).incidents
        if not incidents:
            raise IncidentError(f"{target}: no incident to compare")
        inc = incidents[worst(incidents)]          # the one the dashboard opens on
        # the post-mortem's own id (a run of a store: with its id there), as `new` names it
        sig, skip = of_incident(inc, log.manifest), this_incident(run_id_of(log), inc.step)
        if sig.peak_ratio is None and sig.recovery is None:
            raise IncidentError(f"{target}: no incident to compare")
    # this very incident, already written up, is left out, as the lessons screen leaves it out
    matches = find_similar(root, sig, skip=skip)[:args.top]
    if args.json:
        print_json([{"score": round(m.score, 3), "postmortem": str(m.path), "run_id": m.pm.run_id,
                     "pattern": m.pm.pattern, "why": m.why} for m in matches], allow_nan=True)
        return 0
    if not matches:
        print(_none_similar(root, skip))
    for m in matches:
        print(f"{m.score:.2f}  {m.path}  ({m.pm.run_id}, {m.pm.pattern})")
        for w in m.why:
            print(f"      {w}")
    return 0


def cmd_verify(args) -> int:
    from postmortem.document.verify import verify
    pm = _doc(args.file)
    base_log, missing = _baseline(args.file, pm, args.baseline)
    outcomes = verify(pm, _rerun(args.run, args.run_id), base_log, missing)
    if not outcomes:
        raise DocumentError(f"{args.file}: the Verification section has nothing to check")
    if args.json:
        print_json({"ok": all(o.ok for o in outcomes), "outcomes": [
            {"expectation": o.expectation, "ok": o.ok, "measured": o.measured} for o in outcomes]})
    else:
        for o in outcomes:
            print(f"{'pass' if o.ok else 'FAIL'}  {o.expectation}  [{o.measured}]")
    return 0 if all(o.ok for o in outcomes) else 1


def _rerun(path: str, run_id: str | None):
    """The run made with the fix; in a store of several, the one --run-id names."""
    from postmortem.run import read_run
    from postmortem.run.store import SeveralRuns
    try:
        return read_run(path, run=run_id)
    except SeveralRuns as err:
        ids = [r.id for r in err.runs]
        raise RunReadError(path, f"holds {len(ids)} runs; name the re-run with --run-id ID: "
                                 f"{', '.join(ids[:6])}{' ...' if len(ids) > 6 else ''} "
                                 f"(`postmortem runs {path}` lists them)") from None


def _baseline(path: str, pm, given: str | None):
    """(the original run, or None and why): --baseline as given, else the front matter's
    `run`, found from the document's repository, its folder or here."""
    from postmortem.document.lint import listed
    from postmortem.document.runpath import RunGone, locate, read
    if not given and not pm.run:
        return None, "the document names no run (front matter `run`); --baseline names it"
    found, tried = (given, []) if given else locate(pm.run, path)
    if found is None:
        return None, (f"front matter `run: {pm.run}` is not at {listed([str(p) for p in tried])}; "
                      "--baseline names it")
    try:
        return read(found, pm.run_in_store, given=bool(given)), None      # a run of a store: by its id
    except RunGone as err:
        return None, f"{err}; --baseline names it"


def _add_run_check(p) -> None:
    how = p.add_mutually_exclusive_group()
    how.add_argument("--run", metavar="RUN", help="compare the Symptoms with this run (default: the run "
                                                  "the front matter names)")
    how.add_argument("--no-run-check", action="store_true",
                     help="do not compare the Symptoms with the run (a commit records `numbers: "
                          f"{NOT_CHECKED}` in its front matter)")


def register(sub) -> None:
    """The commands of this file, in the order `--help` lists them."""
    register_new(sub)
    register_check(sub)
    register_commit(sub)
    register_lessons(sub)
    register_similar(sub)
    register_verify(sub)


def register_new(sub) -> None:
    p = command(sub, "new", "write a draft post-mortem of a run's incident",
                "Write a draft post-mortem (Markdown) of one incident of RUN: the Symptoms are the run's\n"
                "numbers, the hypotheses ranked by the diagnosis. Fill sections 3-7, then `check` and `commit`.",
                ("postmortem new runs/r17 --learner ada        # the largest incident",
                 "postmortem new runs/r17 --learner ada --step 4200 -o spike.md",
                 "postmortem new runs/r17 --learner ada --replay  # replay first: section 3 filled"))
    p.add_argument("run", metavar="RUN", help="a run directory or a log file")
    add_learner(p, "who writes it: the post-mortem goes to learners/NAME/ when committed")
    p.add_argument("--step", type=int, help="the incident nearest this step, said when not at it "
                                            "(default: the largest, the one the dashboard opens on)")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: DATE-RUN.md here)")
    add_format(p)
    add_columns(p, step_flag=False)         # --step here is the incident's step
    add_run_id(p)
    p.add_argument("--force", action="store_true", help="overwrite FILE")
    p.add_argument("--replay", action="store_true",
                   help="replay the incident first and fill section 3 with its evidence")
    add_against(p)
    add_json(p, "what was written")
    p.set_defaults(func=cmd_new)


def register_check(sub) -> None:
    p = command(sub, "check", "lint a post-mortem: complete, true to the run, argued",
                "Lint a post-mortem: every section filled, the hypotheses argued, and the Symptoms\n"
                "recomputed from the run its front matter names (`run`) and compared. A run that cannot\n"
                "be found is a problem. Exit 0 when clean, 1 with problems.",
                ("postmortem check 2026-11-23-r17.md",
                 "postmortem check 2026-11-23-r17.md --run runs/r17   # the run moved"))
    p.add_argument("file", metavar="FILE", help="the post-mortem (Markdown)")
    _add_run_check(p)
    add_json(p, '{"ok": ..., "problems": [...]}')
    p.set_defaults(func=cmd_check)


def register_commit(sub) -> None:
    p = command(sub, "commit", "check, write learners/<name>/..., append the lesson, git commit",
                "Check a post-mortem (its numbers against its run, as `check` does), then write it and\n"
                "its figure to learners/NAME/postmortems/ of the knowledge base, append its lesson to\n"
                "learners/NAME/lessons.md and git commit them, all or nothing.\n"
                "Exit 1 without committing when `check` finds problems.",
                ("postmortem commit 2026-11-23-r17.md",
                 "postmortem commit 2026-11-23-r17.md --learner ada --run runs/r17 --kb ~/kb",
                 "postmortem commit 2026-11-23-r17.md --amend  # replace it"))
    p.add_argument("file", metavar="FILE", help="the post-mortem (Markdown)")
    add_learner(p, "whose learners/NAME/ it goes to; the draft's own `learner` when not given")
    _add_run_check(p)
    add_repo(p)
    p.add_argument("--amend", action="store_true", help="replace the post-mortem of the same run and date")
    p.add_argument("--init", action="store_true",
                   help="make a git repository in the knowledge-base folder if there is none")
    add_json(p, "what was committed (or the problems)")
    p.set_defaults(func=cmd_commit)


def register_lessons(sub) -> None:
    p = command(sub, "lessons", "lessons across learners, grouped by pattern",
                "The lessons of every committed post-mortem, across learners, grouped by pattern;\n"
                "the options narrow them as the lessons browser's filter does.",
                ("postmortem lessons",
                 "postmortem lessons --pattern long   # long-tail-token",
                 "postmortem lessons --learner ada --search warmup --json"))
    p.add_argument("--pattern", metavar="TEXT", help="patterns starting with TEXT (long finds long-tail-token)")
    p.add_argument("--learner", metavar="NAME", help="the lessons of learners whose name starts with NAME")
    p.add_argument("--search", metavar="TEXT", help="lessons with every word of TEXT in their pattern, "
                                                      "learner, run or lesson (any case)")
    add_repo(p)
    add_json(p, '{"count": ..., "patterns": [...]}')
    p.set_defaults(func=cmd_lessons)


def register_similar(sub) -> None:
    p = command(sub, "similar", "past post-mortems closest to a run or a post-mortem",
                "The committed post-mortems whose incident looks most like this one (its pattern, dtype,\n"
                "phase of training, whether the grad norm led, rise and recovery), best first, each\n"
                "field said to match or differ.",
                ("postmortem similar runs/r17               # a run: its largest incident",
                 "postmortem similar 2026-11-23-r17.md --top 3"))
    p.add_argument("target", metavar="RUN|FILE", help="a run, or a post-mortem (.md)")
    add_run_id(p)
    add_repo(p)
    p.add_argument("--top", type=int, default=5, metavar="N", help="how many (default: 5)")
    add_json(p, "the matches, a JSON list")
    p.set_defaults(func=cmd_similar)


def register_verify(sub) -> None:
    p = command(sub, "verify", "check the Verification section against a re-run",
                "Check the expectations of a post-mortem's Verification section (e.g. `max loss in\n"
                "[4000, 4500] < 3.0`, `step 5000 val_loss <= 2.1`) against a run made with the fix.\n"
                "Exit 0 when all pass, 1 when one fails.",
                ("postmortem verify 2026-11-23-r17.md --run runs/r17-fixed",
                 "postmortem verify 2026-11-23-r17.md --run runs/r17-fixed --baseline runs/r17"))
    p.add_argument("file", metavar="FILE", help="the post-mortem (Markdown)")
    p.add_argument("--run", required=True, metavar="NEWRUN", help="the run made with the fix")
    p.add_argument("--run-id", metavar="ID", help="NEWRUN's run when it is a store of several (its id, "
                                                "name or folder, as `--run ID` of analyze)")
    p.add_argument("--baseline", metavar="RUN", help="the original run (default: the document's `run`)")
    add_json(p, '{"ok": ..., "outcomes": [...]}')
    p.set_defaults(func=cmd_verify)
