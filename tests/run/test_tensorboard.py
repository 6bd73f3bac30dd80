"""TensorBoard event files laid out byte for byte as the writers do."""

import struct

import numpy as np
import pytest
from writers import field, record, scalar_event, tensor_scalar_event, text_event, varint, write_events

from postmortem.run import RunReadError, read_run


def test_simple_values_and_tensor_scalars_in_several_files(tmp_path):
    run = tmp_path / "tb"
    events = [text_event(0, "args/text_summary", "lr=3e-4")]
    for s in range(300):
        events.append(scalar_event(s, "train/loss", 3.0 - s * 0.01, wall=1.7e9 + s))
        if s % 10 == 0:
            events.append(scalar_event(s, "train/grad_norm", 1.0, wall=1.7e9 + s))
    write_events(run / "events.out.tfevents.1.host.1.0", events)
    # A TF2 writer at the same time in a second file: tensor scalars, packed and unpacked
    write_events(run / "validation" / "events.out.tfevents.2.host.v2",
                 [tensor_scalar_event(s, "val/loss", 2.5, wall=1.7e9 + s + 0.5, packed=s % 200 == 0)
                  for s in range(100, 400, 100)])
    log = read_run(run)
    f = log.frame
    assert log.source.format == "tensorboard"
    assert f.loss.notna().sum() == 300 and f.grad_norm.notna().sum() == 30
    assert f.val_loss.notna().sum() == 3
    assert f.loc[f.step == 150, "loss"].item() == pytest.approx(1.5, rel=1e-6)
    assert "args/text_summary" not in f
    assert len(log.segments()) == 1          # concurrent writers are not resumes
    assert f.wall_time.iloc[5] == 1.7e9 + 5


@pytest.mark.slow
def test_nothing_is_sampled(tmp_path):
    # EventAccumulator would keep a 10,000-point reservoir; every point must survive.
    n = 25_000
    write_events(tmp_path / "events.out.tfevents.1.h",
                 [scalar_event(s, "loss", float(s)) for s in range(n)])
    log = read_run(tmp_path)
    assert len(log.frame) == n and (log.frame.loss.to_numpy() == np.arange(n)).all()


def test_nan_and_inf_values(tmp_path):
    write_events(tmp_path / "events.out.tfevents.1.h",
                 [scalar_event(1, "loss", 1.0), scalar_event(2, "loss", float("nan")),
                  scalar_event(3, "loss", float("inf"))])
    log = read_run(tmp_path)
    assert log.nan_mask("loss").tolist() == [False, True, False]
    assert np.isinf(log.frame.loss.iloc[2])


def test_truncated_tail_is_tolerated_with_a_warning(tmp_path):
    p = write_events(tmp_path / "events.out.tfevents.1.h",
                     [scalar_event(s, "loss", 1.0) for s in range(1, 51)])
    p.write_bytes(p.read_bytes()[:-7])
    log = read_run(tmp_path)
    assert len(log.frame) == 49
    assert any("truncated record" in w for w in log.source.warnings)


def test_corrupt_record_fails_its_crc_and_is_skipped(tmp_path):
    p = write_events(tmp_path / "events.out.tfevents.1.h",
                     [scalar_event(s, "loss", 1.0) for s in range(1, 11)])
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF          # flip a byte inside some record's data
    p.write_bytes(bytes(data))
    log = read_run(tmp_path)
    assert len(log.frame) < 10
    assert any("CRC" in w for w in log.source.warnings)


def test_a_resumed_writer_makes_a_segment(tmp_path):
    write_events(tmp_path / "events.out.tfevents.1.h",
                 [scalar_event(s, "loss", 2.0, wall=1.7e9 + s) for s in range(1, 101)])
    write_events(tmp_path / "events.out.tfevents.2.h",
                 [scalar_event(s, "loss", 1.0, wall=1.7e9 + 1000 + s) for s in range(81, 151)])
    log = read_run(tmp_path)
    assert [(s["first_step"], s["last_step"]) for s in log.segments()] == [(1, 100), (81, 150)]


def test_garbage_named_like_an_event_file(tmp_path):
    (tmp_path / "events.out.tfevents.1.h").write_bytes(b"\x07" * 100)
    with pytest.raises(RunReadError):
        read_run(tmp_path / "events.out.tfevents.1.h")


def test_detected_by_content_without_the_name(tmp_path):
    p = tmp_path / "run.bin"
    p.write_bytes(record(scalar_event(5, "loss", 1.25)))
    log = read_run(p)
    assert log.source.format == "tensorboard" and log.frame.loss.tolist() == [1.25]


def test_agrees_with_tensorboards_own_reader(real_runs):
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    d = real_runs / "hf-trainer-tb-serial-lain"
    ours = read_run(d, format="tensorboard").frame
    for path in sorted(d.rglob("events.out.tfevents*")):
        for ev in loader.EventFileLoader(str(path)).Load():
            for v in ev.summary.value:
                if v.HasField("simple_value") and v.tag == "train/loss":
                    got = ours.loc[ours.step == ev.step, "loss"].item()
                    assert got == struct.unpack("<f", struct.pack("<f", v.simple_value))[0]


def _tensor_event(step: int, tag: str, tensor: bytes, plugin: bytes = b"scalars") -> bytes:
    meta = field(1, 2, field(1, 2, plugin))
    value = field(1, 2, tag.encode()) + field(9, 2, meta) + field(8, 2, tensor)
    return field(1, 1, struct.pack("<d", 1.7e9 + step)) + field(2, 0, step) + field(5, 2, field(1, 2, value))


def test_every_tensor_scalar_shape_a_writer_uses(tmp_path):
    # TensorProto (tensorflow/core/framework/tensor.proto): dtype 1, tensor_content 4, float_val 5,
    # double_val 6, int_val 7, int64_val 10; packed (wire 2) or one value each (wire 5 / 1)
    dt_float, dt_double, dt_int32, dt_int64 = 1, 2, 3, 9
    events = []
    for s in range(1, 4):
        events += [
            _tensor_event(s, "packed_double", field(1, 0, dt_double) + field(6, 2, struct.pack("<d", s / 8))),
            _tensor_event(s, "one_double", field(1, 0, dt_double) + field(6, 1, struct.pack("<d", s / 4))),
            _tensor_event(s, "one_float", field(1, 0, dt_float) + field(5, 5, struct.pack("<f", s / 2))),
            _tensor_event(s, "packed_int64", field(1, 0, dt_int64) + field(10, 2, varint(-s))),
            _tensor_event(s, "packed_int32", field(1, 0, dt_int32) + field(7, 2, varint(7 * s))),
            _tensor_event(s, "content_int64", field(1, 0, dt_int64) + field(4, 2, struct.pack("<q", 100 * s))),
            # not a scalar: two values, a histogram plugin's tensor, a string tensor
            _tensor_event(s, "two_floats", field(1, 0, dt_float) + field(5, 2, struct.pack("<2f", 1, 2))),
            _tensor_event(s, "histogram", field(1, 0, dt_double) + field(6, 2, struct.pack("<d", 1.0)),
                          plugin=b"histograms"),
            _tensor_event(s, "text", field(1, 0, 7) + field(8, 2, b"hello")),
        ]
    write_events(tmp_path / "events.out.tfevents.1.h", events)
    f = read_run(tmp_path).frame.set_index("step")
    assert list(f.index) == [1, 2, 3]
    assert list(f["packed_double"]) == [0.125, 0.25, 0.375]
    assert list(f["one_double"]) == [0.25, 0.5, 0.75]
    assert list(f["one_float"]) == [0.5, 1.0, 1.5]
    assert list(f["packed_int64"]) == [-1.0, -2.0, -3.0]          # int64 varints are two's complement
    assert list(f["packed_int32"]) == [7.0, 14.0, 21.0]
    assert list(f["content_int64"]) == [100.0, 200.0, 300.0]
    assert not {"two_floats", "histogram", "text"} & set(f.columns)
