"""A run folder that holds postmortem's own record (metrics.jsonl beside manifest.json) and the
framework's copies of the same run (checkpoint-N/trainer_state.json, as the Hugging Face
Trainer saves them) reads the record, and names the others."""

import json

from postmortem.run import read_run


def hf_output_dir(d):
    rows = [{"step": s, "loss": 4.0 - s / 100, "grad_norm": 1.0, "lr": 1e-3} for s in range(60)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "manifest.json").write_text(json.dumps({"run_id": "hf-run", "dtype": "fp32"}))
    for n in (20, 40):
        ck = d / f"checkpoint-{n}"
        ck.mkdir()
        history = [{"step": s + 1, "loss": 4.0 - s / 100, "grad_norm": 1.0, "learning_rate": 1e-3}
                   for s in range(n)]
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": n, "log_history": history}))
    return d


def test_the_record_wins_over_the_frameworks_checkpoint_states(tmp_path):
    log = read_run(hf_output_dir(tmp_path))
    assert log.source.format == "jsonl" and len(log.frame) == 60
    notes = " ".join(log.source.warnings)
    assert "the run's postmortem record" in notes and "(hf-trainer-state)" in notes, notes


def test_the_frameworks_copy_is_read_on_request(tmp_path):
    log = read_run(hf_output_dir(tmp_path), format="hf-trainer-state")
    assert log.source.format == "hf-trainer-state" and len(log.frame) == 40


def test_without_a_manifest_the_two_are_still_two_runs(tmp_path):
    import pytest

    from postmortem.errors import RunReadError
    d = hf_output_dir(tmp_path)
    (d / "manifest.json").unlink()
    with pytest.raises(RunReadError, match="different runs or logs"):
        read_run(d)
