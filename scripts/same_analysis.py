"""Behaviour kept through a refactor: `analyze --json` and `info --json` of every sample run and
every run in ../shared/real_runs (each directory, and each file in it), written to one folder,
then compared with another such folder byte for byte.

    python scripts/same_analysis.py write /tmp/before        # before the change
    python scripts/same_analysis.py write /tmp/after         # after it
    python scripts/same_analysis.py diff /tmp/before /tmp/after

Runs in this process (one import of pandas, not ~150): about a minute.
"""

import argparse
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_RUNS = ROOT.parent / "shared" / "real_runs"


def targets() -> list[tuple[str, Path]]:
    """(name of its output, path) for every run the comparison covers."""
    found = [(f"sample--{p.name}", p) for p in sorted((ROOT / "sample_runs").iterdir()) if p.is_dir()]
    if REAL_RUNS.is_dir():
        for run in sorted(p for p in REAL_RUNS.iterdir() if p.is_dir()):
            found.append((f"real--{run.name}", run))
            files = sorted(p for p in run.rglob("*") if p.is_file() and p.name != "SOURCE.md")
            if len(files) > 1:
                found += [(f"real--{run.name}--{'__'.join(p.relative_to(run).parts)}", p) for p in files]
    return found


def one(command: str, path: Path) -> str:
    """What `postmortem COMMAND PATH --json` prints, and its exit code."""
    from postmortem.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([command, str(path), "--json"])
        except SystemExit as leaving:
            code = leaving.code
    text = f"exit {code}\n{out.getvalue()}\n--- stderr\n{err.getvalue()}"
    # the same outputs from any checkout (a worktree, a fresh clone): its paths said as <ROOT>
    return text.replace(str(REAL_RUNS.parent), "<SHARED>").replace(str(ROOT), "<ROOT>")


def write(folder: Path) -> None:
    import os
    import tempfile
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()     # read afresh, never from a cache
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in targets():
        for command in ("analyze", "info"):
            (folder / f"{name}.{command}.txt").write_text(one(command, path))
    print(f"wrote {len(list(folder.iterdir()))} outputs to {folder}")


def diff(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    changed = [n for n in names if not (before / n).is_file() or not (after / n).is_file()
               or (before / n).read_bytes() != (after / n).read_bytes()]
    for name in changed:
        print(f"differs: {name}")
    print(f"{len(names) - len(changed)} of {len(names)} outputs identical")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("write").add_argument("folder", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.action == "write":
        write(args.folder)
        return 0
    return diff(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
