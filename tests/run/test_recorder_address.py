"""The recorder lives at postmortem.run.record; postmortem.record, its old address, still
works for the training scripts written before it moved."""

from postmortem.run import read_run


def test_the_old_and_the_new_address_are_one_recorder(tmp_path):
    import postmortem.record as old
    import postmortem.run.record as new
    assert (old.Recorder, old.batch_hash, old.this_machine) == (new.Recorder, new.batch_hash, new.this_machine)
    # a script written against the old address records a run that reads like any other
    with old.Recorder(tmp_path, manifest={"run_id": "old-address", "dtype": "fp32"}) as rec:
        for step in range(30):
            rec.log(step, loss=4.0 - step / 100, grad_norm=1.0, lr=1e-3, batch_hash=old.batch_hash(bytes([step])))
    log = read_run(tmp_path)
    assert log.run_id == "old-address" and log.source.format == "jsonl" and len(log.frame) == 30
    assert log.frame["batch_hash"].iloc[3] == new.batch_hash(bytes([3]))
