#!/usr/bin/env bash
# Set everything up in .venv (torch pinned to the CPU build on this machine's disk)
# and run the main job on a sample run.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[replay,dev]'
.venv/bin/postmortem analyze "${1:-sample_runs/long-tail-token}"
