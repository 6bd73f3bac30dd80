#!/usr/bin/env bash
# Set everything up in .venv (torch pinned to the CPU build on this machine's disk),
# run the main job on a sample run (or on RUN), and say what to type next.
# A script cannot change the shell that runs it, so `postmortem` reaches your PATH
# only by `source .venv/bin/activate` (printed at the end) or as .venv/bin/postmortem.
set -euo pipefail
cd "$(dirname "$0")/.."
run="${1:-sample_runs/long-tail-token}"

python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "scripts/setup.sh: needs Python 3.10 or newer as python3 (found $(python3 --version 2>&1))" >&2; exit 2; }
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[replay,hf,lightning,figure,mlflow,wandb,dev]'
.venv/bin/postmortem analyze "$run"

cat <<NEXT

Set up. Next, in this shell:
  source .venv/bin/activate          # puts postmortem on your PATH
  postmortem $run    # the dashboard: r replay, e write the post-mortem, l lessons
  postmortem analyze path/to/your/run_or_log
  bash scripts/test.sh --quick       # the fast tests (bash scripts/test.sh: all of them)
NEXT
