#!/usr/bin/env bash
# Drive the real dashboard in tmux as a person would: open a sample run, zoom, move the
# cursor, read the screen, quit. Exits non-zero when the screen is not what it should be.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tmux >/dev/null; then
    echo "e2e_tui: tmux is not installed; skipped"
    exit 0
fi
session="pm-e2e-$$"
screen() { tmux capture-pane -p -t "$session"; }
wait_for() {   # text, seconds
    for _ in $(seq 1 "$2"); do
        if screen | grep -q -- "$1"; then return 0; fi
        sleep 1
    done
    echo "e2e_tui: never saw '$1' on the screen:"; screen; return 1
}
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
tmux new-session -d -s "$session" -x 120 -y 40 ".venv/bin/postmortem tui sample_runs/long-tail-token"
wait_for "spike at step 250" 60
wait_for "long-tail-token" 5
tmux send-keys -t "$session" z
tmux send-keys -t "$session" Right Right Right
wait_for "cursor 253" 10
tmux send-keys -t "$session" q
for _ in $(seq 1 10); do
    tmux has-session -t "$session" 2>/dev/null || { echo "e2e_tui: passed"; exit 0; }
    sleep 1
done
echo "e2e_tui: q did not quit"; screen; exit 1
