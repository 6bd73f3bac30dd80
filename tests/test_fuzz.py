"""Fuzzing the readers: whatever the bytes, only our own RunReadError comes out."""

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from postmortem.run import RunReadError, read_run
from writers import record, scalar_event, wandb_history, write_wandb

# CI replays the same examples every time (a red CI means a regression, not a new draw);
# FUZZ_EXAMPLES=5000 on a developer's machine explores further.
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 150)), deadline=None,
                derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

LINE_PIECES = st.sampled_from([
    " iteration 10/ 100 | lm loss: ", "| loss scale: ", "| grad norm: ", "nan", "inf", "-nan",
    "s:12 trl:", " lr:", " norm:", "step:5/10 train_loss:", "iter 3: loss ", ", time 1ms",
    "{'loss': ", "'grad_norm': ", "}", "[Rank 0] step=10, skipped=1, lr=[", "]", "OVERFLOW! Rank 0 ",
    "Attempted loss scale: ", ", reducing to ", "| train_inner | {", '"num_updates": "', '"',
    "1e999", "1,234", "\r", "\n", "|", ":", "=", "\x1b[31m", "[default7]: ", "epoch 001: 1 / 9 loss=",
    "step: 4  loss: ", "step: 1|act_loss: ", "validation loss at iteration 10 | lm loss value: ",
])


def read_bytes_as(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        try:
            log = read_run(p)
            assert len(log.frame) >= 1
        except RunReadError:
            pass


@FUZZ
@given(st.lists(st.one_of(LINE_PIECES, st.text(max_size=8),
                          st.integers(-10, 10**12).map(str),
                          st.floats(allow_nan=True, allow_infinity=True).map(str)), max_size=120))
def test_text_logs(pieces):
    read_bytes_as("".join(pieces).encode("utf-8", "replace"), "train.log")


@FUZZ
# found by this test: a first "record" whose length is absurd left no candidate at all
@example(b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\t\x00\x00\x00", "events.out.tfevents.1.h")
@given(st.binary(max_size=2000), st.sampled_from(["events.out.tfevents.1.h", "x.wandb", "m.parquet",
                                                   "metrics.csv", "metrics.jsonl", "trainer_state.json",
                                                   "mlflow.db", "blob"]))
def test_random_bytes_under_any_name(data, name):
    read_bytes_as(data, name)


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, val in flips:
        if buf:
            buf[pos % len(buf)] = val
    return bytes(buf[:cut] if cut is not None else buf)


EVENTS = b"".join(record(scalar_event(s, "loss", 1.0 / (s + 1))) for s in range(40))
TB_MAGIC_LEN = 12


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.one_of(st.none(), st.integers(0, len(EVENTS))))
def test_mutated_event_files(flips, cut):
    read_bytes_as(_mutate(EVENTS, flips, cut), "events.out.tfevents.1.h")


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
       st.one_of(st.none(), st.integers(0, 4000)))
def test_mutated_wandb_logs(flips, cut):
    with tempfile.TemporaryDirectory() as d:
        p = write_wandb(Path(d) / "r.wandb", [wandb_history(s, {"train/loss": str(s)}) for s in range(60)])
        data = p.read_bytes()
    read_bytes_as(_mutate(data, flips, cut), "run-1/r.wandb")


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
       st.one_of(st.none(), st.integers(0, 3000)))
def test_mutated_trainer_state(flips, cut):
    base = (b'{"global_step": 30, "log_history": ['
            + b",".join(b'{"loss": %d.5, "grad_norm": NaN, "learning_rate": 1e-3, "step": %d}' % (i, i)
                        for i in range(30)) + b"]}")
    read_bytes_as(_mutate(base, flips, cut), "trainer_state.json")
