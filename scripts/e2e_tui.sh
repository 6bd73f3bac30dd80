#!/usr/bin/env bash
# Drive the real app in tmux as a person would, through the whole flow: open a sample run,
# zoom and move the cursor, replay the incident (a real child process), write the
# post-mortem in the editor (its figure drawn beside the draft), commit both into a fresh
# git repository, find its lesson in the browser and the figure in its preview, quit. Exits non-zero when the screen or the repository is not what it should be.
# As the README has it: `postmortem init --kb DIR` names the knowledge base once, and the app
# runs from another folder (neither the knowledge base nor this checkout) without --kb.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tmux >/dev/null; then
    echo "e2e_tui: tmux is not installed; skipped"
    exit 0
fi
here=$(pwd)
kb=$(mktemp -d)
work=$(mktemp -d)    # where the user stands: not the knowledge base, not the checkout
xdg=$(mktemp -d)     # the settings, drafts and views of whoever runs it stay out of it
export XDG_CONFIG_HOME="$xdg/config" XDG_STATE_HOME="$xdg/state" XDG_CACHE_HOME="$xdg/cache"
session="pm-e2e-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; tmux kill-session -t "keepalive-$$" 2>/dev/null || true; rm -rf "$kb" "$work" "$xdg"' EXIT
# a session that outlives the app's: when the app's ends, the tmux server stays up for the next
tmux new-session -d -s "keepalive-$$" "sleep 600"
export GIT_AUTHOR_NAME=e2e GIT_AUTHOR_EMAIL=e2e@example.invalid
export GIT_COMMITTER_NAME=e2e GIT_COMMITTER_EMAIL=e2e@example.invalid

screen() { tmux capture-pane -p -t "$session"; }
# `grep -q` stops reading at the first match; under pipefail the writer's SIGPIPE would
# fail the pipeline, so the text is read whole first
has() { grep -q -- "$2" <<<"$1"; }
wait_for() {   # text, seconds
    for _ in $(seq 1 "$(( $2 * 4 ))"); do
        if has "$(screen)" "$1"; then return 0; fi
        sleep 0.25
    done
    echo "e2e_tui: never saw '$1' on the screen:"; screen; return 1
}
keys() { tmux send-keys -t "$session" "$@"; sleep 0.3; }
type_text() { tmux send-keys -t "$session" -l "$1"; sleep 0.3; }

# the knowledge base named once (init makes it a git repository); the learner is left for
# the commit screen to ask
checkout_before=$(git -C "$here" status --porcelain)
(cd "$work" && "$here/.venv/bin/postmortem" init --kb "$kb" >/dev/null 2>&1)
test -d "$kb/.git" || { echo "e2e_tui: postmortem init --kb made no repository"; exit 1; }
tmux new-session -d -s "$session" -x 120 -y 40 -c "$work" \
    -e XDG_CONFIG_HOME="$XDG_CONFIG_HOME" -e XDG_STATE_HOME="$XDG_STATE_HOME" -e XDG_CACHE_HOME="$XDG_CACHE_HOME" \
    -e GIT_AUTHOR_NAME=e2e -e GIT_AUTHOR_EMAIL=e2e@example.invalid \
    -e GIT_COMMITTER_NAME=e2e -e GIT_COMMITTER_EMAIL=e2e@example.invalid \
    "$here/.venv/bin/postmortem tui --device cpu $here/sample_runs/long-tail-token"
wait_for "spike at step 250" 60
wait_for "long-tail-token" 5
wait_for "causes of the spike at step 250" 5     # the ranking beside the incidents
wait_for "1. long-tail-token" 5
wait_for "▶ incidents" 5                        # the focus, said in words
echo "e2e_tui: dashboard up, its causes ranked"
keys z
keys Right Right Right
wait_for "cursor 253" 10

# the replay: every arm, in a child process; the evidence arrives, the ranking comes back
keys r
wait_for "press r to replay" 10
keys r
wait_for "done on cpu: faithful" 120
wait_for "swap-batch arm" 5
wait_for "re-ranked: 1. long-tail-token" 5
echo "e2e_tui: replay done"
keys Escape
wait_for "replay evidence kept" 10

# the editor: sections 3 and 2 came from the replay; fill 4-7
keys e
wait_for "f5 re-derives" 10             # the editor's Symptoms line
wait_for "4 Root cause x" 5              # the focus starts in the first empty section: root cause
# each text is waited for on the screen before the next key: on a loaded machine the app
# reads the keys late, and a Tab sent into a burst of typing is not where it was meant
type_text "Half of the batch of step 250 was junk of long-tail tokens the model had almost never seen."
wait_for "almost never seen." 10
keys Tab; sleep 0.5; keys Tab; sleep 0.5   # remediation -> its usual remedies
keys Enter                               # adds the first remedy
wait_for "5 Remediation ok" 10
type_text "l"                            # a letter typed into the list: the text's, no lessons screen
sleep 1
has "$(screen)" "lessons (enter opens" && { echo "e2e_tui: a letter in the editor opened the lessons"; exit 1; }
wait_for "▶ usual remedies" 5
keys Tab; sleep 0.5
type_text "seed: 1234"; keys Enter
type_text "through step: 249"; keys Enter
type_text "expect: step 250 loss < 2.0"
wait_for "6 Verification ok" 10
keys Tab; sleep 0.5
type_text "A spike on one batch with a smooth LR: look at the batch before the optimizer."
wait_for "complete: ready to commit" 15
keys Enter                               # the lesson is one line: Enter moves on
sleep 1
wait_for "complete: ready to commit" 10
ls "$kb"/.postmortem/drafts/19-spike-001-250.png >/dev/null \
    || { echo "e2e_tui: no figure beside the draft"; ls -R "$kb/.postmortem"; exit 1; }
echo "e2e_tui: post-mortem complete, its figure drawn"

# commit into the fresh repository
keys C-g
wait_for "learner (the lessons file" 10
for _ in 1 2 3; do                      # a key read before the input had the focus is lost: again
    keys C-u
    type_text "ada"
    for _ in $(seq 1 12); do has "$(screen)" "learners/ada/lessons.md" && break; sleep 0.25; done
    has "$(screen)" "learners/ada/lessons.md" && break
done
wait_for "learners/ada/lessons.md" 5
wait_for "Enter commits exactly these files" 10
wait_for "(the figure)" 5
keys Enter
wait_for "committed " 15
has "$(git -C "$kb" log --oneline)" "post-mortem 19-spike-001 (long-tail-token)" \
    || { echo "e2e_tui: no commit in $kb"; git -C "$kb" log --oneline; exit 1; }
test -f "$kb"/learners/ada/postmortems/*-19-spike-001.md
grep -q "look at the batch before the optimizer" "$kb/learners/ada/lessons.md"
committed=$(git -C "$kb" show --name-only --format= HEAD)
has "$committed" "postmortems/.*-19-spike-001.png" || { echo "e2e_tui: the figure is not in the commit"; echo "$committed"; exit 1; }
png=$(basename "$kb"/learners/ada/postmortems/*-19-spike-001.png)
grep -q "^!\[.*\]($png)\$" "$kb"/learners/ada/postmortems/*-19-spike-001.md \
    || { echo "e2e_tui: the committed post-mortem does not show $png"; exit 1; }
[ "$(head -c 4 "$kb/learners/ada/postmortems/$png" | od -An -c | tr -d ' ')" = "211PNG" ] \
    || { echo "e2e_tui: $png is not a PNG"; exit 1; }
test ! -e "$kb"/.postmortem/drafts/19-spike-001-250.png       # the draft's copy went with the draft
# every number was checked against the run (a commit without the check records it)
sed -n '2,/^---$/p' "$kb"/learners/ada/postmortems/*-19-spike-001.md | grep -q "^numbers:" \
    && { echo "e2e_tui: the numbers were not checked against the run"; exit 1; }
grep -q '^learner = "ada"' "$XDG_CONFIG_HOME/postmortem/config.toml" \
    || { echo "e2e_tui: the learner asked for is not kept for next time"; exit 1; }
[ "$(git -C "$here" status --porcelain)" = "$checkout_before" ] \
    || { echo "e2e_tui: the checkout was written to"; git -C "$here" status --short; exit 1; }
echo "e2e_tui: committed with its figure, into the knowledge base init named, from another folder"

# the lesson in the browser, its post-mortem opened: a terminal shows the figure's path
keys l
wait_for "A spike on one batch" 10
keys Tab
keys Enter
wait_for "figure: .*$png" 10
echo "e2e_tui: the lesson found, its post-mortem names its figure"
has "$(cd "$work" && "$here/.venv/bin/postmortem" lessons --pattern long-tail-token)" "look at the batch before the optimizer" \
    || { echo "e2e_tui: postmortem lessons does not find the lesson"; exit 1; }
keys Escape
keys C-q
for _ in $(seq 1 10); do
    tmux has-session -t "$session" 2>/dev/null || break
    sleep 1
done
tmux has-session -t "$session" 2>/dev/null && { echo "e2e_tui: ctrl+q did not quit"; screen; exit 1; }

# a killed app loses seconds of typing at most: type, pause, SIGKILL, reopen
tmux new-session -d -s "$session" -x 100 -y 30 -c "$work" \
    "$here/.venv/bin/postmortem tui --device cpu $here/sample_runs/fp16-overflow"
wait_for "at step" 60
keys e
# the editor's sections line (at 100x30 the focus on the first empty section scrolls the
# Symptoms line out of sight, sooner or later after the editor opens)
wait_for "1 Symptoms ok" 10
type_text "Typed just before the crash."
sleep 2
kill -9 "$(tmux display -p -t "$session" '#{pane_pid}')"
grep -rq "Typed just before the crash." "$kb/.postmortem/drafts/" \
    || { echo "e2e_tui: the draft lost the typing"; ls -R "$kb/.postmortem"; exit 1; }
tmux kill-session -t "$session" 2>/dev/null || true
tmux new-session -d -s "$session" -x 100 -y 30 -c "$work" \
    "$here/.venv/bin/postmortem tui --device cpu $here/sample_runs/fp16-overflow"
wait_for "at step" 60
keys e
wait_for "is back" 10
wait_for "Typed just before the crash." 5
echo "e2e_tui: the draft survived a kill -9"
keys Escape
keys q

# a run that cannot be read: its one line and exit code 2, before any app
tmux kill-session -t "$session" 2>/dev/null || true
tmux new-session -d -s "$session" -x 100 -y 30 -c "$work" \
    "$here/.venv/bin/postmortem tui $work/no-such-run; echo \"exit code \$?\"; sleep 30"
wait_for "exit code 2" 30
has "$(screen)" "postmortem: error: .*no-such-run" || { echo "e2e_tui: no one-line error"; screen; exit 1; }
echo "e2e_tui: an unreadable run exits 2 with its reason"
echo "e2e_tui: passed"
