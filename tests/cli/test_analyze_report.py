"""What `analyze` tells a user about what it read: the reader's warnings, and no all-clear
for a run whose loss was never found."""

import json

import pytest
from cli_run import postmortem


def csv_without_a_loss(path):
    """A log whose only metric is named nothing like a loss, with a NaN in it."""
    lines = ["step,objective"] + [f"{s},{'nan' if s == 200 else 2 - s / 1000}" for s in range(400)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_no_loss_read_is_not_an_all_clear(tmp_path):
    r = postmortem("analyze", csv_without_a_loss(tmp_path / "m.csv"))
    assert r.returncode == 0, r.stderr
    assert "warning: no column looks like the loss; --loss COLUMN names it" in r.stdout
    assert "no NaN, no spike, no divergence" not in r.stdout
    assert "no loss was read" in r.stdout and "--loss COLUMN" in r.stdout


@pytest.mark.slow
def test_the_loss_named_gives_the_all_clear_its_meaning(tmp_path):
    r = postmortem("analyze", csv_without_a_loss(tmp_path / "m.csv"), "--loss", "objective", "--json")
    data = json.loads(r.stdout)
    assert "loss" in data["run"]["metrics"] and not any("loss" in w for w in data["run"]["warnings"])
    [inc] = data["incidents"]
    assert inc["kind"] == "nan" and inc["step"] == 200


@pytest.mark.slow
def test_the_readers_warnings_are_in_the_report_and_the_json(tmp_path):
    rows = [json.dumps({"step": s, "loss": 2.0 - s / 1000}) for s in range(300)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + "\n" + rows[0][:9])    # a cut last line
    r = postmortem("analyze", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    [warning] = [w for w in json.loads(r.stdout)["run"]["warnings"] if "last line" in w]
    text = postmortem("analyze", tmp_path)
    assert f"warning: {warning}" in text.stdout
    assert "no incident: no NaN, no spike, no divergence" in text.stdout


@pytest.mark.slow
def test_many_incidents_say_which_are_in_full_and_why(real_runs):
    """More than five: the table shows each one's severity, the header names the five shown in
    full and the order, and they come in that order, the most severe first."""
    import re
    r = postmortem("analyze", real_runs / "modded-nanogpt-muon")
    assert r.returncode == 0, r.stderr
    head = re.search(r"the 5 that matter most in full below \((.*?)\): (.*)", r.stdout)
    assert head and "by severity" in head[1], r.stdout[:2000]
    named = [int(n) for n in re.findall(r"#(\d+)", head[2])]
    rows = {int(m[1]): float(m[2]) for m in re.finditer(r"^\s*(\d+)\s+spike\s+\S+\s+\d+\s+\S+\s+x[\d.]+\s+([\d.]+)\s",
                                                         r.stdout, re.M)}
    assert len(rows) > 5
    assert named == sorted(rows, key=lambda n: -rows[n])[:5]
    shown = [int(m[1]) for m in re.finditer(r"^(\d+)\. spike .*, severity [\d.]+\)", r.stdout, re.M)]
    assert shown == named


@pytest.mark.slow
def test_a_loss_scale_cascade_is_called_one(real_runs):
    """The scale halving again and again is a cascade to the reader; the JSON keeps the
    contract's kind, "spike" of loss_scale."""
    run = real_runs / "issue-chinese-transformer-xl-7-lossscale-nan"
    text = postmortem("analyze", run).stdout
    assert "cascade of loss_scale at step 500" in text and "spike of loss_scale" not in text
    kinds = {(i["kind"], i["metric"]) for i in json.loads(postmortem("analyze", run, "--json").stdout)["incidents"]}
    assert ("spike", "loss_scale") in kinds
