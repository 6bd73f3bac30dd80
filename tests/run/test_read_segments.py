"""Relaunches are segments: a step logged again (a second launch appended to the same file,
two runs pasted one after the other), or a relaunch that keeps counting that a resume line,
the LR back in warmup, a launch column or the wall clock gives away. Identical lines of
several ranks still merge; two values for one step, and NaN rows, are never dropped."""

import json
import math

from postmortem.run import read_run


def _jsonl(tmp_path, rows, name="metrics.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def _text(tmp_path, lines, name="train.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_second_launch_appended_to_the_jsonl_from_its_last_step(tmp_path):
    first = [{"step": s, "loss": 3 - s / 10, "lr": 1e-4} for s in range(1, 11)]
    second = [{"step": s, "loss": math.nan if s == 10 else 2.5 - s / 20, "lr": 1e-4} for s in range(10, 15)]
    run = read_run(_jsonl(tmp_path, first + second))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 10), (10, 14)]
    f = run.frame
    at10 = f[f.step == 10]
    assert len(at10) == 2 and at10.loss.iloc[0] == 2.0 and math.isnan(at10.loss.iloc[1])
    assert run.nan_mask("loss").sum() == 1
    assert any("logged again with other values" in w for w in run.source.warnings)


def test_second_launch_from_an_earlier_step_keeps_its_nan_rows(tmp_path):
    rows = [{"step": s, "loss": 3 - s / 10} for s in range(1, 11)]
    rows += [{"step": s, "loss": math.nan if s in (7, 8) else 2.8 - s / 10} for s in range(6, 15)]
    run = read_run(_jsonl(tmp_path, rows))
    assert len(run.segments()) == 2 and run.nan_mask("loss").sum() == 2
    assert len(run.frame) == 19


def test_identical_lines_of_several_ranks_merge(tmp_path):
    lines = []
    for s in range(10, 60, 10):
        lines += [f"[rank{r}]: step {s} | loss {3 - s / 100:.2f} | lr 0.0001" for r in range(4)]
    run = read_run(_text(tmp_path, lines))
    assert len(run.segments()) == 1 and run.frame.step.tolist() == [10, 20, 30, 40, 50]


def test_two_runs_pasted_one_after_the_other(tmp_path):
    lines = [f"step {s} | loss {3 - s / 1000:.3f} | lr 0.0001" for s in range(10, 110, 10)]
    lines += [f"step {s} | loss {2.5 - s / 1000:.3f} | lr 0.0001" for s in range(10, 60, 10)]
    run = read_run(_text(tmp_path, lines))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 100), (10, 50)]


def test_relaunch_at_the_last_step_in_a_text_log(tmp_path):
    lines = [f"step {s} | loss {3 - s / 1000:.3f}" for s in range(10, 110, 10)]
    lines += [f"step {s} | loss {2.5 - s / 1000:.3f}" for s in range(100, 150, 10)]
    run = read_run(_text(tmp_path, lines))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 100), (100, 140)]


def test_micro_batches_of_one_step_are_not_relaunches(tmp_path):
    lines = [f"step {s} | loss {3 - s / 100 - m / 1000:.4f}" for s in range(1, 21) for m in range(4)]
    run = read_run(_text(tmp_path, lines))
    assert len(run.segments()) == 1 and len(run.frame) == 20
    assert any("micro-batches" in w for w in run.source.warnings)


def test_relaunch_that_keeps_counting_with_a_resume_line(tmp_path):
    lines = [f"{{'loss': {3 - s / 1000:.3f}, 'learning_rate': 1e-4, 'step': {s}}}" for s in range(10, 110, 10)]
    lines = [f"step {s} | loss {3 - s / 1000:.3f} | lr 0.0001" for s in range(10, 110, 10)]
    lines += ["[INFO|trainer.py:2105] 2024-05-01 10:00:00,000 >>   Continuing training from global step 100"]
    lines += [f"step {s} | loss {2.9 - s / 1000:.3f} | lr 0.0001" for s in range(110, 160, 10)]
    run = read_run(_text(tmp_path, lines))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(10, 100), (110, 150)]
    assert run.source.extras["resumes"][0]["dialect"] == "transformers.resume"


def test_relaunch_that_keeps_counting_lr_back_in_warmup(tmp_path):
    def lr(k):
        return 1e-3 * min(1.0, (k + 1) / 5) * (0.9 if k > 5 else 1.0)
    rows = [{"step": s, "loss": 3 - s / 100, "lr": lr(s - 1 if s <= 20 else s - 21)} for s in range(1, 31)]
    run = read_run(_jsonl(tmp_path, rows))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 20), (21, 30)]
    assert any("warmup" in w for w in run.source.warnings)


def test_an_annealed_lr_is_no_relaunch(tmp_path):
    rows = [{"step": s, "loss": 3 - s / 100, "lr": 1e-3 / 4 ** (s // 10)} for s in range(1, 41)]
    assert len(read_run(_jsonl(tmp_path, rows)).segments()) == 1


def test_relaunch_told_by_a_run_column(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,phase\n" + "".join(
        f"{s},{3 - s / 100},{'pretrain' if s <= 5 else 'finetune'}\n" for s in range(1, 11)))
    run = read_run(p)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 5), (6, 10)]


def test_relaunch_told_by_the_wall_clock(tmp_path):
    rows = [{"step": s, "loss": 3 - s / 100, "wall_time": 1000.0 + 10 * s + (7200 if s > 6 else 0)}
            for s in range(1, 13)]
    run = read_run(_jsonl(tmp_path, rows))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 6), (7, 12)]
