"""The nanoGPT family: karpathy/nanoGPT, build-nanogpt, llm.c, modded-nanogpt.

Each format string below is copied from the repository at the commit named in `source`
(read with `git show COMMIT:path`); where a later commit changed the words, both are kept.
nanoGPT train.py prints `iter N: loss X, time Yms, mfu Z%` and, at each eval, `step N: train
loss X, val loss Y`. build-nanogpt prints `step N | loss: X | lr ... | norm: ...` and writes
`N train X` / `N val X` / `N hella X` to log.txt. llm.c's logger (llmc/logger.h; in
train_gpt2.cu itself before May 2024) writes `s:N trl:X [lr:.. norm:..]`, `s:N tel:X`,
`s:N eval:X`; its stdout is `step N/M | loss X (..z)| norm ..` (four wordings over its history,
all kept). modded-nanogpt began as llm.c's train_gpt2.py (same stdout and log file), then
printed `step:N/M train_loss:X train_time:..`; since late 2024 the train line has no loss,
only the val line does (`step:N/M val_loss:X ...`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

_NANOGPT = "karpathy/nanoGPT 3adf61e (master, 2025-11) train.py"
_BUILD = "karpathy/build-nanogpt 6104ab1 (master, 2024-06) train_gpt2.py"
_LLMC = "karpathy/llm.c f1e2ace (master, 2025-05)"
_MODDED = "KellerJordan/modded-nanogpt f411b3d (master, 2026-08) train_gpt.py"

# llm.c's stdout (train_gpt2.cu printf0), oldest first: a00a3a8 (2024-04), norm, lr, 'train
# loss' with bars and MFU, and today's 'loss' with z-scores; train_gpt2.py prints the
# bars form with '| train loss {lossf:.6f} |'
_LLMC_STDOUT = (
    'printf0("step %4d/%d: train loss %f (acc %f) (%f ms, %d tok/s)\\n", ...)',
    'printf0("step %4d/%d: train loss %f norm %.4f lr %.2e (%.2f ms, %.0f tok/s)\\n", ...)',
    'printf0("step %4d/%d | train loss %7.6f | norm %6.4f | lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\\n", ...)',
    'printf0("step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | '
    '%.0f tok/s\\n", ...)',
)

register(
    entry("nanogpt.iter", "nanoGPT", "progress", _NANOGPT + " (line 327); before ab0718a without ', mfu'",
          'print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")',
          r"^iter (?P<step>\d+): loss (?P<loss>" + NUM + r")(?:, time (" + NUM + r")ms)?(?:, mfu (" + NUM + r")%)?",
          (f"iter {250}: loss {2.0311:.4f}, time {35.12:.2f}ms, mfu {31.2:.2f}%",
           f"iter {0}: loss {10.9876:.4f}, time {1234.5:.2f}ms, mfu {-100.0:.2f}%",    # running_mfu starts at -1
           f"iter {251}: loss {2.0299:.4f}, time {35.12:.2f}ms")),           # before ab0718a (2023-02-05): no mfu
    entry("nanogpt.eval", "nanoGPT", "eval", _NANOGPT + " (line 265)",
          'print(f"step {iter_num}: train loss {losses[\'train\']:.4f}, val loss {losses[\'val\']:.4f}")',
          r"^step (?P<step>\d+): train loss (?P<loss>" + NUM + r"), val loss (?P<val_loss>" + NUM + r")",
          (f"step {250}: train loss {1.9712:.4f}, val loss {2.0634:.4f}",)),
    entry("build-nanogpt.logtxt", "build-nanogpt", "progress", _BUILD + " (lines 399, 444, 516, 518)",
          'f.write(f"{step} train {loss_accum.item():.6f}\\n")  |  f"{step} val {val_loss_accum.item():.4f}\\n"  |  '
          'f"{step} hella {acc_norm:.4f}\\n"  |  print(f"step {step:5d} | loss: {loss_accum.item():.6f} | lr {lr:.4e} '
          '| norm: {norm:.4f} | dt: {dt*1000:.2f}ms | tok/sec: {tokens_per_sec:.2f}")',
          r"^(?P<step>\d+) (?P<stream>train|val|hella) (?P<value>[\d.]+)\s*$|^step\s+(?P<step2>\d+) \| loss: ",
          (f"{100} train {5.123456:.6f}", f"{250} val {4.9876:.4f}", f"{250} hella {0.2871:.4f}",
           f"step {100:5d} | loss: {5.123456:.6f} | lr {6e-4:.4e} | norm: {0.9123:.4f} | dt: {312.5:.2f}ms"
           f" | tok/sec: {1677721.6:.2f}")),
    entry("llm.c.step", "llm.c", "progress",
          _LLMC + " llmc/logger.h (logger_log_train / _val / _eval); a00a3a8 train_gpt2.cu; train_gpt2.py",
          'fprintf(logfile, "s:%d trl:%.4f lr:%.6f norm:%.2f\\n", step, train_loss, learning_rate, grad_norm)  |  '
          '"s:%d trl:%.4f\\n" (before)  |  "s:%d tel:%.4f\\n"  |  "s:%d eval:%.4f\\n"  |  train_gpt2.py '
          'f.write("s:%d trl:%f\\n" % (step, lossf))',
          r"^s:(?P<step>\d+) (?P<fields>(?:\w+:" + NUM + r"(?:ms)?\s*)+)$",
          ("s:%d trl:%.4f lr:%.6f norm:%.2f" % (100, 3.2812, 6e-4, 0.91), "s:%d tel:%.4f" % (250, 3.3012),
           "s:%d eval:%.4f" % (250, 0.2934), "s:%d trl:%.4f" % (101, 3.2799), "s:%d trl:%f" % (102, 3.279812),
           # modded-nanogpt's first log file added its timings to llm.c's words
           "s:%d trl:%f train_time:%.0fms step_avg:%.2fms" % (103, 3.2701, 23456, 230.12))),
    entry("llm.c.stdout", "llm.c", "progress", _LLMC + " train_gpt2.cu (printf0 in main), train_gpt2.py (print0)",
          "  |  ".join(_LLMC_STDOUT),
          # `step N/M:` (2024-04 .. 05) or `step N/M |` (since), then `train loss` or `loss`
          r"^step\s+(?P<step>\d+)/\d+(?::| \|) (?:train )?loss (?P<loss>" + NUM + r")",
          ("step %4d/%d: train loss %f (acc %f) (%f ms, %d tok/s)" % (10, 74, 9.1234, 9.1012, 120.5, 43690),
           "step %4d/%d: train loss %f norm %.4f lr %.2e (%.2f ms, %.0f tok/s)" % (11, 74, 9.0, 1.23, 6e-5, 120.5,
                                                                                   43690),
           "step %4d/%d | train loss %7.6f | norm %6.4f | lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"
           % (12, 74, 8.9, 1.2, 6e-5, 120.5, 41.2, 43690),
           "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"
           % (13, 74, 8.8, -0.31, 1.1, 0.12, 6e-5, 120.5, 41.2, 43690),
           # train_gpt2.py (and modded-nanogpt's first train_gpt2.py, 2024-06)
           f"step {14:4d}/{74} | train loss {8.7:.6f} | norm {1.0:.4f} | lr {6e-5:.2e} | ({120.5:.2f} ms | "
           f"{43690:.0f} tok/s)")),
    entry("modded-nanogpt.step", "modded-nanogpt", "progress", _MODDED + " (lines 2342, 2369); older commits",
          'print0(f"step:{step+1}/{train_steps} train_time:{approx_training_time_ms:.0f}ms step_avg:...ms")  |  '
          'print0(f"step:{step}/{train_steps} val_loss:{val_loss:.4f} train_time:{training_time_ms:.0f}ms '
          'step_avg:...ms")  |  (2024) f"step:{step+1}/{args.num_iterations} train_loss:{train_loss.item():.4f} '
          'train_time:{approx_time:.0f}ms step_avg:{approx_time/timed_steps:.2f}ms"',
          r"^step:(?P<step>\d+)/\d+ (?P<fields>.*)$",
          (f"step:{125}/{3200} val_loss:{4.0123:.4f} train_time:{29000:.0f}ms step_avg:{232.0:.2f}ms",
           f"step:{10}/{3200} train_loss:{4.1234:.4f} train_time:{2345:.0f}ms step_avg:{234.5:.2f}ms",
           f"step:{11}/{3200} train_time:{2580:.0f}ms step_avg:{234.5:.2f}ms")),
)
