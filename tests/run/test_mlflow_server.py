"""A real `mlflow server` on 127.0.0.1 (SQLite backend in a temp dir, a free port, stopped at the
end): runs logged to it with MLflow's client, read back by URI, one at a time and all at once."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from test_stores_frameworks import log_mlflow_runs, same_as_mlflow

from postmortem.run import read_run
from postmortem.run.store import SeveralRuns

pytestmark = pytest.mark.slow
mlflow = pytest.importorskip("mlflow")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mlflow server` on a free port; waits at most 90 s for it to answer, stopped at the end."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen([str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--default-artifact-root", str(root / "artifacts"), "--workers", "1"],
                            cwd=root, stdout=open(root / "server.log", "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("mlflow server did not start: " + (root / "server.log").read_text()[-2000:])
            time.sleep(0.5)
        made = log_mlflow_runs(uri)
        yield uri, made
    finally:
        os.killpg(proc.pid, signal.SIGTERM)       # the server and its worker, by their group
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def pm(*args):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_every_run_reads_the_points_the_client_logged(server):
    uri, made = server
    with pytest.raises(SeveralRuns) as err:
        read_run(uri)
    assert sorted(r.id for r in err.value.runs) == sorted(made)
    for rid, history in made.items():
        log = read_run(uri, run=rid)
        assert log.source.format == "mlflow-server" and log.source.extras["mlflow_run_id"] == rid
        same_as_mlflow(log, history)
    nan_run = read_run(uri, run="fp16-1")
    assert nan_run.nan_mask("loss").sum() == 1 and np.isposinf(nan_run.frame.loss).sum() == 1
    assert len(read_run(uri, run="baseline-1").segments()) == 2      # the resumed stretch


def test_the_listing_says_each_runs_name_start_steps_and_status(server):
    uri, made = server
    with pytest.raises(SeveralRuns) as err:
        read_run(uri)
    rows = {r.name: r for r in err.value.runs}
    assert sorted(rows) == ["baseline/baseline-0", "baseline/baseline-1", "fp16/fp16-0", "fp16/fp16-1"]
    # 40 steps each; the resumed run logged 30-34 again: still 40 distinct steps
    assert all(r.steps == 40 and r.status == "finished" and r.start for r in rows.values()), rows
    assert str(err.value).count(" 40 steps  finished") == 4


def test_export_of_a_run_asked_for(server, tmp_path):
    import csv
    uri, made = server
    rid = next(iter(made))
    r = pm("export", uri, "--run", rid, "-o", tmp_path / "run.csv")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "run.csv", newline="") as f:
        got = sorted(float(x["loss"]) for x in csv.DictReader(f) if x["loss"] not in ("", "nan"))
    want = sorted(v for _, v in made[rid]["train/loss"] if v == v)
    np.testing.assert_array_equal(np.array(got) * 1.0, np.where(np.abs(want) >= np.finfo(float).max,
                                                                np.sign(want) * np.inf, want))


@pytest.mark.asyncio
async def test_the_tui_picker_opens_a_server_run(server):
    """`postmortem tui URI`: the picker lists the server's runs; enter opens the one highlighted."""
    from pilots import opened

    from postmortem.tui.app import PostmortemApp
    from postmortem.tui.screens.picker import PickerScreen, runs_to_pick
    uri, made = server
    picking = runs_to_pick(uri, None, f"{uri}: holds 4 ... --run ID ...")
    assert picking is not None and sorted(r.id for r in picking) == sorted(made)
    app = PostmortemApp(uri, picking=picking)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        table = app.screen.query_one("#runs")
        second = table.get_row_at(1)
        assert table.row_count == 4 and second[3] == "40" and second[4] == "finished"
        await pilot.press("down", "enter")
        await opened(app, pilot)
        assert app.session.error is None, app.session.error
        assert app.session.log.source.extras["store_run"] == second[0] == picking[1].id


def test_cli_lists_picks_and_scans(server, tmp_path):
    uri, made = server
    r = pm("analyze", uri)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 + len(made) and f"analyze {uri} --run ID" in lines[0]
    r = pm("info", uri, "--run", "fp16-1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["run"]["format"] == "mlflow-server", r.stderr
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "postmortem", "runs", uri, "--json"], capture_output=True,
                       text=True, timeout=300, env=env)
    rows = json.loads(r.stdout)["runs"]
    assert r.returncode == 0 and sorted(x["id"] for x in rows) == sorted(made), r.stderr
    nan_row = next(x for x in rows if x["name"] == "fp16/fp16-1")
    assert nan_row["incidents"] >= 1 and nan_row["kind"] == "nan"


def test_a_server_that_is_not_there_is_one_line():
    r = pm("info", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_postmortem_of_a_server_run_keeps_the_address_and_the_id(server, tmp_path, monkeypatch, capsys):
    """`new URI --run NAME`: the front matter keeps the address as it is and the run's id, and
    `check` from another folder reads that run again from the server (its numbers compared)."""
    from test_store_postmortems import filled, front

    from postmortem.cli.parser import main
    uri, made = server
    monkeypatch.chdir(tmp_path)
    doc = tmp_path / "fp16.md"
    assert main(["new", uri, "--run", "fp16-1", "--learner", "ada", "-o", str(doc)]) == 0
    rid = next(r for r in made if read_run(uri, run=r).source.extras.get("mlflow_run_name") == "fp16-1")
    assert front(doc)["run"] == uri and front(doc)["run_in_store"] == rid
    filled(doc, expect_below=50)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["check", str(doc)]) == 0
    assert capsys.readouterr().out.strip() == f"{doc}: complete and true to the run {uri} --run {rid}"
