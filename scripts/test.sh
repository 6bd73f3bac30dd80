#!/usr/bin/env bash
# Run the tests (after scripts/setup.sh). With no arguments: every test, as CI runs them.
# --quick: the fast tier, -m "not slow" (under a minute). Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] ||
  { echo "scripts/test.sh: no .venv here; run bash scripts/setup.sh first" >&2; exit 2; }
args=()
for arg in "$@"; do
  if [ "$arg" = --quick ]; then args+=(-m "not slow"); else args+=("$arg"); fi
done
exec .venv/bin/python -m pytest ${args[@]+"${args[@]}"}
