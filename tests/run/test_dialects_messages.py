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
            "mmengine", "fairseq2", "torchtune", "OLMo", "levanter", "OpenNMT-py", "mmcv", "GPT-NeoX",
            "NeMo", "accelerate", "torch.distributed.elastic", "Marian"} <= frameworks
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


def _skips_with_scale():
    # Paddle's `decrease to: 32768.0*0.5` among them: a message is looked for before code is
    for d, e in CASES:
        m = d.pattern.search(e)
        if d.kind in SKIPS and "step" not in m.re.groupindex and d.id != "deepspeed.grad_overflow":
            scale = m.group("scale") if "scale" in m.re.groupindex else None
            yield pytest.param(d, e, scale, id=f"{d.id}:{e[:30]}")


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
    # (one said after its own step's line, DLLogger's BERT scale, is on the step before it)
    at = 10 if dialect.after_step_line else 20
    assert f.loc[20, "loss"] == 2.40
    if "norm" in dialect.pattern.groupindex:
        # a trainer's skip on the non-finite grad norm it names (ESPnet, FunASR), in a log that
        # prints no loss scale: that grad norm on that step, no scaler's overflow
        assert not math.isfinite(f.loc[20, "grad_norm"]) and math.isnan(f.loc[30, "grad_norm"])
        assert "overflows" not in f and dialect.id in run.source.extras["series_dialects"]["grad_norm"]
        return
    assert f.loc[at, "overflows"] == 1 and math.isnan(f.loc[30, "overflows"])
    if scale is not None:
        assert f.loc[at, "loss_scale"] == float(scale)
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
    # the attempted scale of the first message is kept on the step before it: 3 halvings, not 2
    assert run.frame.loss_scale.tolist() == [65536, 32768, 16384, 8192]
    assert run.frame.step.tolist() == [0, 1, 2, 3]
    assert set(run.metrics) == {"loss_scale", "skipped", "overflows"}


# Progress frames that carry metrics, from their frameworks' format strings, with a message
# written behind them on the same line (no newline between: the bar's frame and the logger's
# line). `{i}` the step, `{l}` the loss; frames of one line joined by `sep`.
GLUED_FRAMES = {
    # Lightning's tqdm bar: desc f"Epoch {current_epoch}", tqdm's
    # '{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]'
    "lightning tqdm, \\r frames": ("\r", "Epoch 0:  {i}%|\u258c         | {i}/100 [00:10<03:00,  4.50it/s, "
                                           "v_num=1, loss={l:.3f}, lr=0.0003]"),
    # Megatron's training_log: ' iteration {:8d}/{:8d} |' ... ' lm loss: {:.6E} |', on rank 3
    "megatron, [rank3]:": ("\n", "[rank3]:  iteration {i:8d}/     100 | consumed samples: {i:12d} | "
                                  "learning rate: 3.000E-04 | lm loss: {l:.6E} |"),
    # the pipe line behind DeepSpeed's logger prefix, no newline before the message
    "pipe line, deepspeed logger": ("\n", "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] "
                                           "step {i} | loss {l:.2f} | lr 3e-4 "),
}
GLUED_AT = (4, 7)


@pytest.mark.parametrize("frame", list(GLUED_FRAMES))
@pytest.mark.parametrize("dialect,example,scale", [p for p in _skips_with_scale()
                                                   # a JSON record is a line of its own (DLLogger's DLLL)
                                                   if not p.values[1].startswith("DLLL {")])
def test_message_glued_behind_a_frame_with_metrics(tmp_path, frame, dialect, example, scale):
    """The frame's metrics and the message are both read: the loss on every step, the skip on
    the step of the frame it was written behind, never a metric named after its words."""
    sep, fmt = GLUED_FRAMES[frame]
    lines = [fmt.format(i=i, l=3 - i / 10) + (example if i in GLUED_AT else "") for i in range(1, 11)]
    log = tmp_path / "glued.log"
    log.write_text(sep.join(lines) + "\n")
    run = read_run(log)
    f = run.frame
    assert f.loss.round(3).tolist() == [round(3 - i / 10, 3) for i in range(1, 11)], frame
    glued = f.loss.round(3).isin([round(3 - i / 10, 3) for i in GLUED_AT])
    if "norm" in dialect.pattern.groupindex:
        # a skip naming its non-finite grad norm, no loss scale printed: that grad norm, no overflow
        bad = run.nan_mask("grad_norm") | f.grad_norm.abs().eq(math.inf).to_numpy()
        assert bad.tolist() == glued.tolist() and "overflows" not in f
    else:
        assert f.overflows[glued].tolist() == [1, 1] and f.overflows[~glued].isna().all()
    if scale is not None and "loss_scale" in f:
        assert f.loss_scale[glued].tolist() == [float(scale)] * 2
    assert not any(c.startswith(("Attempted", "reducing", "Reducing", "current", "decrease"))
                   for c in run.metrics), run.metrics


RESUMES = [pytest.param(d, e, id=f"{d.id}:{i}") for d in EVENTS if d.kind == "resume"
           for i, e in enumerate(d.examples)]


@pytest.mark.parametrize("dialect,example", RESUMES)
def test_resume_entry_opens_a_segment_where_the_steps_go_on(tmp_path, dialect, example):
    """A relaunch that keeps counting: only the resume words say it, and the segment starts at
    the step line after them."""
    lines = [f"step {s} | loss {3 - s / 100:.2f} | lr 0.0001" for s in range(10, 60, 10)]
    lines.append(f"2024-01-01 10:00:00 | INFO | train | {example}")
    lines += [f"step {s} | loss {2.6 - s / 100:.2f} | lr 0.0001" for s in range(60, 110, 10)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 50), (60, 100)]
    assert [r["dialect"] for r in run.source.extras["resumes"]] == [dialect.id]


ELASTIC = "INFO:torch.distributed.elastic.agent.server.api:"
RESULT_BLOCK = ["  restart_count=1", "  master_addr=node-1", "  master_port=29500", "  group_rank=0",
                "  group_world_size=1", "  local_ranks=[0, 1, 2, 3]", "  role_ranks=[0, 1, 2, 3]",
                "  global_ranks=[0, 1, 2, 3]", "  role_world_sizes=[4, 4, 4, 4]",
                "  global_world_sizes=[4, 4, 4, 4]", ""]


def _torchrun_relaunch(tmp_path, block):
    lines = [f"[rank0]: step {s} | loss {3 - s / 100:.2f} | lr 0.0001" for s in range(10, 60, 10)]
    lines += [f"{ELASTIC}[default] Worker group FAILED. 3/3 attempts left; will restart worker group",
              f"{ELASTIC}[default] Stopping worker group",
              f"{ELASTIC}[default] Rendezvous'ing worker group",
              f"{ELASTIC}[default] Rendezvous complete for workers. Result:", *block,
              f"{ELASTIC}[default] Starting worker group"]
    # the script loaded its newest checkpoint: the steps go on, the loss lower, the LR the same
    lines += [f"[rank0]: step {s} | loss {2.6 - s / 100:.2f} | lr 0.0001" for s in range(60, 110, 10)]
    log = tmp_path / "torchrun.log"
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def test_torchrun_restarting_the_worker_group_is_a_relaunch(tmp_path):
    run = _torchrun_relaunch(tmp_path, [])
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 50), (60, 100)]
    assert run.source.extras["resumes"] == [{"step": 60, "dialect": "torch_elastic.restart"}]
    assert set(run.metrics) == {"loss", "lr"}


# torch/distributed/launcher/api.py, `Starting elastic_operator with launch configs:` (%-style)
LAUNCH_CONFIGS = ["  entrypoint       : train.py", "  min_nodes        : 2", "  max_nodes        : 2",
                  "  nproc_per_node   : 4", "  run_id           : 4", "  rdzv_backend     : c10d",
                  "  rdzv_endpoint    : node-1:29400", "  rdzv_configs     : {'timeout': 900}",
                  "  max_restarts     : 3", "  monitor_interval : 5", "  log_dir          : None",
                  "  metrics_cfg      : {}", ""]


@pytest.mark.parametrize("block", [
    RESULT_BLOCK,                                                   # the f-string releases
    RESULT_BLOCK[:-1] + ["  event_log_handler=null", ""],          # the %-style ones
    [f"{ELASTIC.replace('agent.server.api', 'launcher.api')}Starting elastic_operator with launch "
     f"configs:", *LAUNCH_CONFIGS, *RESULT_BLOCK],
], ids=["result f-string", "result %-style", "launch configs and result"])
def test_torchrun_relaunch_with_the_rendezvous_result_block(tmp_path, block):
    """The agent's multi-line blocks (`  restart_count=1`, `  master_port=29500`, `  nproc_per_node
    : 4`) are the launcher's facts, not a row of metrics: the new segment starts at the next step."""
    run = _torchrun_relaunch(tmp_path, block)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 50), (60, 100)]
    assert set(run.metrics) == {"loss", "lr"}


def _onmt_step(s):
    return (f"[2024-01-01 10:00:00,000 INFO] Step {s}/200000; acc: 40.12; ppl: 30.51; xent: 3.42; "
            f"lr: 0.00100; 12345/13456 tok/s;     60 sec")


def test_opennmt_legacy_fp16_overflows(tmp_path):
    """OpenNMT-py's legacy fp16 (apex.contrib's FP16_Optimizer) prints two lines per overflow
    after an empty one; three between the reports at 200 and 250 are the steps 248..250, and
    a static-scale skip is one skip at the scale it names."""
    lines = ["[2024-01-01 09:59:00,000 INFO] Loading checkpoint from models/wmt_step_100.pt",
             _onmt_step(150), _onmt_step(200)]
    for scale in (65536.0, 32768.0, 16384.0):
        lines += ["", "Grad overflow on iteration 1234", f"Using dynamic loss scale of {scale}"]
    lines += [_onmt_step(250), _onmt_step(300), "", "Grad overflow on iteration 1300",
              "Using static loss scale of 128.0", _onmt_step(350)]
    log = tmp_path / "onmt.log"
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log)
    f = run.frame.set_index("step")
    assert f.overflows.dropna().index.tolist() == [248, 249, 250, 350]
    assert f.loc[350, "loss_scale"] == 128
    assert len(run.segments()) == 1                    # a checkpoint load is no relaunch
    assert not {"Using", "Grad", "iteration"} & set(run.metrics)
    dialects = run.source.extras["series_dialects"]["overflows"]
    assert dialects == ["apex.contrib.grad_overflow", "opennmt.apex_static"]


def test_fairseq2_overflow_cascade_on_the_steps_it_names(tmp_path):
    """fairseq2 names the step of each overflow: five halvings are five steps, the scale after
    each kept; its restore words open the log without an empty segment."""
    head = "[11/26/26 10:00:00] INFO     fairseq2 - "

    def metrics(s, loss):
        return (f"{head}Train Metrics (step {s}) - Loss: {loss:.3f} | Gradient Norm: 1.20 | "
                f"Learning Rate: 0.0001")
    lines = [f"{head}Restoring training from the last checkpoint at step 100.",
             f"{head}Training restored. Resuming from step 100.", metrics(110, 2.5), metrics(120, 2.4)]
    lines += [f"{head}Overflow detected at step {s}, ignoring gradient, decreasing loss scale from {a:g} "
              f"to {a / 2:g}." for s, a in ((121, 128), (122, 64), (123, 32), (124, 16), (125, 8))]
    lines += [metrics(130, 2.6), f"{head}No gradient overflow detected in the last 2000 step(s) after "
              f"step 2130, increasing loss scale from 4 to 8.", metrics(2140, 2.3)]
    log = tmp_path / "fairseq2.log"
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log)
    f = run.frame.set_index("step")
    assert f.overflows.dropna().index.tolist() == [121, 122, 123, 124, 125]
    # `from 128` of the first one kept on the step before it: five halvings, not four
    assert f.loss_scale.dropna().to_dict() == {120: 128, 121: 64, 122: 32, 123: 16, 124: 8, 125: 4, 2130: 8}
    assert len(run.segments()) == 1 and f.loc[130, "loss"] == 2.6
    # the step its words name (`Resuming from step 100.`), as Megatron's `at iteration N` is
    assert run.source.extras["resumes"] == [{"step": 100, "dialect": "fairseq2.resumed"}]


def test_eval_boundaries_are_events_on_the_next_step(tmp_path):
    """The words around an eval with no step of their own (fairseq, HF Trainer) are kept on the
    step the next progress line names; the values around them are untouched."""
    lines = [f"step {s} | loss {3 - s / 100:.2f} | lr 0.0001" for s in (10, 20)]
    lines += ["2024-01-01 10:00:00 | INFO | fairseq_cli.train | begin validation on \"valid\" subset",
              "step 30 | loss 2.70 | lr 0.0001",
              "[INFO|trainer.py:3512] 2024-01-01 10:00:00,000 >> ***** Running Evaluation *****",
              "step 40 | loss 2.60 | lr 0.0001",
              "01/01/2024 10:00:00 - INFO - transformers.trainer - ***** Running Evaluation *****",
              "step 50 | loss 2.50 | lr 0.0001"]
    log = tmp_path / "evals.log"
    log.write_text("\n".join(lines) + "\n")
    run = read_run(log)
    assert run.source.extras["evals"] == [{"step": 30, "dialect": "fairseq.validation"},
                                          {"step": 40, "dialect": "transformers.evaluation"},
                                          {"step": 50, "dialect": "transformers.evaluation"}]
    assert run.frame.step.tolist() == [10, 20, 30, 40, 50] and set(run.metrics) == {"loss", "lr"}
    assert len(run.segments()) == 1


def _fairseq2_validation(tmp_path, metrics, values=True):
    head = "[11/26/26 10:00:00] INFO     fairseq2 - "
    lines = [head + metrics(s) for s in (10, 20, 30)] + [f"{head}Starting validation after step 30."]
    lines += [f"{head}Validation Metrics (step 30) - Loss: 2.900"] if values else []
    lines += [f"{head}Validation finished."] + [head + metrics(s) for s in (40, 50)]
    log = tmp_path / "fairseq2.log"
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def test_fairseq2_validation_on_the_step_it_names(tmp_path):
    run = _fairseq2_validation(tmp_path, lambda s: f"Train Metrics (step {s}) - Loss: {3 - s / 1000:.3f} | "
                                                   f"Learning Rate: 0.0001")
    assert run.source.extras["evals"] == [{"step": 30, "dialect": "fairseq2.validation"}]
    assert run.frame.set_index("step").loc[30, "val_loss"] == 2.9


@pytest.mark.parametrize("progress", [
    lambda s: f"step {s} | loss {3 - s / 1000:.3f} | lr 0.0001",
    lambda s: f"[rank3]: iteration {s:8d}/    1000 | lm loss: {3 - s / 1000:.6E} |",
    lambda s: f"{s}/1000 [00:10<03:00,  4.50it/s, loss={3 - s / 1000:.3f}]",
], ids=["pipe line", "megatron on [rank3]:", "tqdm postfix"])
def test_fairseq2_validation_step_in_another_trainers_log(tmp_path, progress):
    """A step that ends a sentence (`after step 30.`) is the message's own step."""
    run = _fairseq2_validation(tmp_path, progress, values=False)
    assert run.source.extras["evals"] == [{"step": 30, "dialect": "fairseq2.validation"}]


def test_a_step_with_a_decimal_part_is_no_step():
    """`step 30.` ends a sentence; `step 30.5` (a value) and `iteration 1.2.3` are no counter."""
    from postmortem.run.metriclines.pairs import parse
    for text, kind in [("step 30. loss: 2.1", "step"), ("iteration 7. lm loss: 2.1", "iteration"),
                       ("epoch 3. loss 2.1", "epoch")]:
        p = parse(text)
        span = p.epoch if kind == "epoch" else p.counters.get(kind)
        assert span is not None and text[span[0]:span[1]] in ("30", "7", "3"), text
    for text in ("step 30.5 | loss 2.1", "iteration 1.2.3 | loss 2.1"):
        assert not {"step", "iteration"} & set(parse(text).counters), text


def test_the_prefilter_pieces_hold_every_keyword_and_no_progress_line():
    """The line readers test every line: a few pieces stand for all the keywords (a line with
    a keyword has a piece), and none is in a progress line of the catalogue."""
    from postmortem.run.metriclines import overflow
    overflow.entries()
    pieces = overflow._KEYWORDS
    keywords = {k for d in EVENTS for k in d.keywords}
    assert len(pieces) < len(keywords) / 2
    assert all(any(p in k for p in pieces) for k in keywords)
    progress = [e for d in catalogue() if d.kind in ("progress", "eval") for e in d.examples]
    assert not any(p in line for p in pieces for line in progress)
    # a keyword with no piece of its own (too short, or all in progress lines) stands for itself
    piece, short = overflow.stems(["loss", "OVERFLOW! Rank"], ["loss 2.5 | step 3"])
    assert len(piece) == 7 and piece in "OVERFLOW! Rank" and short == "loss"
