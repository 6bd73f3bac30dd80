"""The training script's own loss lines in a DeepSpeed log, on the engine's steps.

The engine prints `[Rank 0] step=N, skipped=K, lr=[..]` from `_take_model_step` (label N during
the N-th optimizer step, `_report_progress(self.global_steps + 1)`); the script prints its loss
after `model_engine.step()` (DeepSpeedExamples' `Epoch: 0 | Step: N | Loss: X`, DeepSpeed-Chat's
`Epoch: e, Step: s, Rank: r, loss = X`, cifar's `[e, i] loss: X`, tqdm bars). Its counter may be
the engine's (`global_steps`), the dataloader's (micro-batches, restarting every epoch) or none.
"""

from __future__ import annotations

from dataclasses import dataclass

from postmortem.run.metriclines.pairs import parse


@dataclass
class UserRow:
    record: int                 # the row's place among the Collector's records
    counter: int | None         # the script's own step counter, where it prints one
    after: int                  # how many engine lines were read before it


def loss_values(line: str) -> tuple[dict[str, str | float], int | None] | None:
    """A script's line that carries a loss: its values and its step counter; None otherwise."""
    parsed = parse(line)
    if not parsed.values or not any(v.column.lower().endswith("loss") for v in parsed.values):
        return None
    values: dict[str, str | float] = {}
    for v in parsed.values:
        values[v.column] = v.const if v.const is not None else line[v.start:v.end]
    kind = parsed.step_kind
    counter = None
    if kind is not None:
        s, e = parsed.counters[kind]
        digits = line[s:e]
        counter = int(digits) if digits.isdigit() else None
    return values, counter


def steps_of(rows: list[UserRow], engine: list[int]) -> list[int]:
    """Each script row's step on the engine's clock. The script's counter where it keeps to the
    engine's (never back, within one step of the engine lines around it); otherwise the rows
    between two engine lines are spread evenly from the first one's step to the next's (the
    script prints after `step()`, so its row right after engine line N is step N)."""
    if not engine:
        return [r.counter if r.counter is not None else k for k, r in enumerate(rows)]
    if _counters_agree(rows, engine):
        return [r.counter for r in rows]        # type: ignore[misc]
    gaps = [b - a for a, b in zip(engine, engine[1:]) if b > a]
    gap = sorted(gaps)[len(gaps) // 2] if gaps else 1
    by_interval: dict[int, list[int]] = {}
    for k, r in enumerate(rows):
        by_interval.setdefault(r.after, []).append(k)
    out = [0] * len(rows)
    for after, ks in by_interval.items():
        start = engine[after - 1] if after else max(engine[0] - gap, 0)
        end = engine[after] if after < len(engine) else start + gap
        width = max(end - start, 1)
        for j, k in enumerate(ks):
            out[k] = start + j * width // len(ks)
    return out


def _counters_agree(rows: list[UserRow], engine: list[int]) -> bool:
    last = -1
    for r in rows:
        c = r.counter
        if c is None or c < last:
            return False
        before = engine[r.after - 1] if r.after else None
        after = engine[r.after] if r.after < len(engine) else None
        if (before is not None and c < before - 1) or (after is not None and c > after):
            return False
        last = c
    return True
