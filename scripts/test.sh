#!/usr/bin/env bash
# Run the tests (after scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest "$@"
