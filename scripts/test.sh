#!/usr/bin/env bash
# Run the tests (after scripts/setup.sh). With no arguments: every test, as CI runs them.
# --quick: the fast tier, -m "not slow" (under a minute). Other arguments go to pytest.
# Every test runs on every core (pytest-xdist), a test file to a worker: its fixtures and the
# sample runs it trains stay in one process. -n N chooses the workers; -n 0,
# --collect-only and --snapshot-update run in this process (the SVGs are written by one).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] ||
  { echo "scripts/test.sh: no .venv here; run bash scripts/setup.sh first" >&2; exit 2; }
args=() workers=(-n auto --dist loadfile)
for arg in "$@"; do
  case "$arg" in
    --quick) args+=(-m "not slow") ;;
    -n|-n*|--numprocesses*|--snapshot-update|--collect-only|--co) workers=(); args+=("$arg") ;;
    *) args+=("$arg") ;;
  esac
done
[ "${#workers[@]}" -eq 0 ] || .venv/bin/python -c "import xdist" 2>/dev/null || workers=()
exec .venv/bin/python -m pytest ${workers[@]+"${workers[@]}"} ${args[@]+"${args[@]}"}
