"""A step header and the indented `name=value` lines under it (OLMo, Composer): every
line of the block belongs to that step, names that differ only in their digits too."""

import pytest

from postmortem.run import read_run


def at(log, step, col):
    f = log.frame
    return f[f.step == step][col].iloc[-1]


def _block_log(tmp_path):
    lines = ["2025-01-01 10:00:00.000\thost:0\tolmo.train:990\tINFO\tPre-train system metrics",
             "    System/Peak GPU Memory (MB)=173.0"]
    for step in range(10, 60, 10):
        lines.append(f"2025-01-01 10:00:{step:02d}.000\thost:0\tolmo.train:990\tINFO\t"
                     f"[step={step}/1000,epoch=0]")
        lines += [f"    train/CrossEntropyLoss={10 - step / 100:.2f}",
                  f"    layer0/grad_l1_norm={step + 0.1:.1f}",
                  f"    layer0/grad_l2_norm={step + 0.2:.1f}",
                  f"    layer1/grad_l1_norm={step + 0.3:.1f}",
                  f"    layer1/grad_l2_norm={step + 0.4:.1f}",
                  f"    System/Peak GPU Memory (MB)={40000 + step:,}"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_line_of_a_step_block_is_read(tmp_path):
    log = read_run(_block_log(tmp_path))
    names = {f"layer{i}/grad_l{j}_norm" for i in (0, 1) for j in (1, 2)}
    assert names <= set(log.metrics)
    for step in range(10, 60, 10):
        for i, name in enumerate(sorted(names)):
            assert at(log, step, name) == pytest.approx(step + 0.1 * (i + 1))
        # the step's own memory line, not the pre-train one placed at the first step
        assert at(log, step, "System/Peak GPU Memory (MB)") == 40000 + step
    assert not any("repeat the step" in w for w in log.source.warnings)


def test_olmo_grad_provenance_norms(real_runs):
    """`grad_provenance/*_l1_norm` and `*_l2_norm` print the same shape of line: both read."""
    run = real_runs / "olmo-console-20m-zero-gradnorm-flatloss"
    fresh = read_run(run / "train_fresh.log")
    for part in ("embedding", "output_proj"):
        for norm in ("l1_norm", "l2_norm"):
            assert fresh.frame[f"grad_provenance/{part}_grad_{norm}"].notna().sum() == 43
    # step 10's lines: `output_proj_grad_l2_norm=0.1485`, `output_proj_grad_l1_norm=41.48`
    assert at(fresh, 10, "grad_provenance/output_proj_grad_l1_norm") == 41.48
    assert at(fresh, 10, "grad_provenance/output_proj_grad_l2_norm") == 0.1485
    assert at(fresh, 10, "System/Peak GPU Memory (MB)") == 42054
    old = read_run(run / "train.log")
    assert old.frame["grad_provenance/output_proj_grad_l2_norm"].notna().sum() == 75
    for log in (fresh, old):
        assert not any("repeat the step" in w for w in log.source.warnings)
