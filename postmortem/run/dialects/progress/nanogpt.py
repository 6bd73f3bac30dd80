"""The nanoGPT family: karpathy/nanoGPT, build-nanogpt, llm.c, modded-nanogpt.

nanoGPT train.py: `print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
{running_mfu*100:.2f}%")` and the eval `print(f"step {iter_num}: train loss {losses['train']:.4f},
val loss {losses['val']:.4f}")`. build-nanogpt train_gpt2.py: stdout `step {step:5d} | loss:
{loss_accum.item():.6f} | lr {lr:.4e} | norm: {norm:.4f} | dt: ...` and log.txt
`f"{step} train {loss_accum.item():.6f}"`, `f"{step} val {val_loss_accum.item():.4f}"`,
`f"{step} hella {acc_norm:.4f}"`. llm.c train_gpt2.py / .cu log file: `s:%d trl:%f`,
`s:%d tel:%f`. modded-nanogpt train_gpt.py: `step:{step}/{train_steps} train_loss:{...:.4f}
train_time:{...:.0f}ms step_avg:{...:.2f}ms` and `val_loss:`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import NUM, entry

register(
    entry("nanogpt.iter", "nanoGPT", "progress", "karpathy/nanoGPT master train.py",
          'f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%"',
          r"^iter (?P<step>\d+): loss (?P<loss>" + NUM + r")(?:, time (" + NUM + r")ms)?(?:, mfu (" + NUM + r")%)?",
          (f"iter {250}: loss {2.0311:.4f}, time {35.12:.2f}ms, mfu {31.2:.2f}%",)),
    entry("nanogpt.eval", "nanoGPT", "eval", "karpathy/nanoGPT master train.py",
          'f"step {iter_num}: train loss {losses[\'train\']:.4f}, val loss {losses[\'val\']:.4f}"',
          r"^step (?P<step>\d+): train loss (?P<loss>" + NUM + r"), val loss (?P<val_loss>" + NUM + r")",
          (f"step {250}: train loss {1.9712:.4f}, val loss {2.0634:.4f}",)),
    entry("build-nanogpt.logtxt", "build-nanogpt", "progress", "karpathy/build-nanogpt master train_gpt2.py",
          'f"{step} train {loss_accum.item():.6f}\\n"  |  f"{step} val {val_loss_accum.item():.4f}\\n"',
          r"^(?P<step>\d+) (?P<stream>train|val|hella) (?P<value>[\d.]+)\s*$|^step\s+(?P<step2>\d+) \| loss: ",
          (f"{100} train {5.123456:.6f}", f"{250} val {4.9876:.4f}", f"{250} hella {0.2871:.4f}",
           f"step {100:5d} | loss: {5.123456:.6f} | lr {6e-4:.4e} | norm: {0.9123:.4f} | dt: {312.5:.2f}ms"
           f" | tok/sec: {1677721.6:.2f}")),
    entry("llm.c.step", "llm.c", "progress", "karpathy/llm.c master train_gpt2.cu (logger_log_train / _val)",
          'fprintf(logger->logfile, "s:%d trl:%f\\n", step, train_loss)  |  "s:%d tel:%f\\n"',
          r"^s:(?P<step>\d+) (?P<fields>(?:\w+:" + NUM + r"\s*)+)$",
          ("s:%d trl:%f" % (100, 3.281234), "s:%d tel:%f" % (250, 3.301234))),
    entry("modded-nanogpt.step", "modded-nanogpt", "progress", "KellerJordan/modded-nanogpt master train_gpt.py",
          'print0(f"step:{step}/{train_steps} train_loss:{train_loss.item():.4f} train_time:{...:.0f}ms '
          'step_avg:{...:.2f}ms")',
          r"^step:(?P<step>\d+)/\d+ (?P<fields>.*)$",
          (f"step:{10}/{3200} train_loss:{4.1234:.4f} train_time:{2345:.0f}ms step_avg:{234.5:.2f}ms",
           f"step:{125}/{3200} val_loss:{4.0123:.4f} train_time:{29000:.0f}ms step_avg:{232.0:.2f}ms")),
)
