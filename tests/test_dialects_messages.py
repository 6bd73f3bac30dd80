"""The catalogue's event messages: every entry read from its own format string's lines, alone
and in the composite lines real consoles make (logger prefixes, timestamps, `[rankN]:`,
tqdm frames with `\\r`, a message glued to the end of a progress frame, several ranks)."""

import math

import pytest

from postmortem.run import read_run
from postmortem.run.dialects import catalogue
from postmortem.run.metriclines.overflow import EVENT_KINDS, SKIPS, find_event

EVENTS = [d for d in catalogue() if d.kind in EVENT_KINDS]
CASES = [(d, e) for d in EVENTS for e in d.examples]
FRAME = "  5%|\u258c         | 50/1000 [00:10<03:00,  4.50it/s]"
WRAPS = {
    "alone": "{}",
    "deepspeed logger": "[2024-01-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] {}",
    "python logging": "2024-01-01 10:00:00 | INFO | fairseq.trainer | {}",
    "torchrun rank": "[rank3]: {}",
    "glued to tqdm": FRAME + "[2024-01-01 10:00:00,000] [INFO] [stage3.py:2323:step] {}",
    "after a \\r frame": FRAME + "\r{}",
}


def _value(text: str, span) -> float:
    return float(text[span[0]:span[1]])


def test_every_entry_names_its_source_and_words():
    frameworks = {d.framework for d in EVENTS}
    assert {"DeepSpeed", "apex", "fairseq", "Megatron-LM", "ColossalAI", "HF Trainer", "Lightning",
            "mmengine"} <= frameworks
    for d in EVENTS:
        assert "/" in d.source and d.format and d.keywords and d.examples, d.id
        for example in d.examples:
            assert any(k in example for k in d.keywords), (d.id, example)


@pytest.mark.parametrize("wrap", list(WRAPS))
@pytest.mark.parametrize("dialect,example", CASES, ids=[f"{d.id}:{i}" for i, (d, _) in enumerate(CASES)])
def test_entry_found_in_every_line_shape(dialect, example, wrap):
    line = WRAPS[wrap].format(example)
    part = line.split("\r")[-1]               # tqdm's frames: the reader splits at \r
    ev = find_event(part)
    assert ev is not None and ev["dialect"] == dialect.id, (line, ev)
    m = dialect.pattern.search(example)
    for name in ("scale", "prev_scale", "step", "rank"):
        if name in m.re.groupindex and m.group(name) is not None:
            assert ev[name] is not None
            assert _value(part, ev[name]) == float(m.group(name))


# Paddle prints `decrease to: 32768.0*0.5`: pairs.parse takes the line for source code before
# it looks for a message (a reordering in pairs.py, not this catalogue's file)
LOOKS_LIKE_CODE = {"paddle.decrease"}
CODE_LIKE = "the general reader tests for code before messages; the line readers read it"


def _skips_with_scale():
    for d, e in CASES:
        m = d.pattern.search(e)
        if d.kind in SKIPS and "step" not in m.re.groupindex and d.id != "deepspeed.grad_overflow":
            scale = m.group("scale") if "scale" in m.re.groupindex else None
            marks = [pytest.mark.xfail(strict=True, reason=CODE_LIKE)] if d.id in LOOKS_LIKE_CODE else []
            yield pytest.param(d, e, scale, id=f"{d.id}:{e[:30]}", marks=marks)


@pytest.mark.parametrize("dialect,example,scale", list(_skips_with_scale()))
def test_entry_read_into_the_run(tmp_path, dialect, example, scale):
    """Between two progress lines, behind a logger prefix: a skipped step on the step the next
    line names, and the scale it printed as the loss scale there."""
    log = tmp_path / "train.log"
    log.write_text(f"step 10 | loss 2.50 | lr 0.0001\n"
                   f"[2024-01-01 10:00:00,000] [INFO] [optimizer.py:99:step] {example}\n"
                   f"step 20 | loss 2.40 | lr 0.0001\n"
                   f"step 30 | loss 2.30 | lr 0.0001\n")
    run = read_run(log)
    f = run.frame.set_index("step")
    assert f.loc[20, "overflows"] == 1 and math.isnan(f.loc[30, "overflows"])
    assert f.loc[20, "loss"] == 2.40
    if scale is not None:
        assert f.loc[20, "loss_scale"] == float(scale)
    assert not any(c.startswith(("Attempted", "reducing", "Reducing")) for c in run.metrics)
    assert dialect.id in run.source.extras["series_dialects"]["overflows"]


def test_several_ranks_print_one_message(tmp_path):
    """DeepSpeed's unfused optimizer logs on every rank: eight identical lines are one skip."""
    msg = ("[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
           "65536.0, reducing to 32768.0")
    lines = ["step 10 | loss 2.5"] + [f"[rank{r}]: [2024-01-01 10:00:00,00{r}] [INFO] "
                                      f"[unfused_optimizer.py:207:step] {msg}" for r in range(8)]
    log = tmp_path / "ranks.log"
    log.write_text("\n".join(lines + ["step 20 | loss 2.4", "step 30 | loss 2.3"]) + "\n")
    run = read_run(log)
    f = run.frame.set_index("step")
    assert f.overflows.sum() == 1 and f.loc[20, "loss_scale"] == 32768
    assert any("counted once" in w for w in run.source.warnings)


def test_message_glued_to_the_end_of_a_progress_frame(tmp_path):
    """The scaler's message written behind tqdm's frame on one line: the frame's counter is the
    step it was printed at, never two metrics named after the message's words."""
    frames = []
    for i, (a, b) in enumerate([(65536, 32768), (32768, 16384), (16384, 8192)], 1):
        frames.append(f"{FRAME.replace('50/1000', f'{i}/1000')}[2024-01-01 10:00:0{i},000] [INFO] "
                      f"[loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                      f"Attempted loss scale: {a}, reducing to {b}")
    log = tmp_path / "glued.log"
    log.write_text("\r".join(frames) + "\n")
    run = read_run(log)
    assert run.frame.loss_scale.tolist() == [32768, 16384, 8192]
    assert run.frame.step.tolist() == [1, 2, 3]
    assert set(run.metrics) == {"loss_scale", "skipped", "overflows"}
