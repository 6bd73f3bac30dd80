"""`postmortem runs STORE`: every run analyzed in worker processes, newest first, each run's result
cached by its files' sizes and mtimes so that a rescan analyzes only what changed."""

import json
import os
import subprocess
import sys

import pytest
from test_stores_frameworks import tb_write

from postmortem.scan import cache_dir, scan


def make_store(root, n=4):
    """A TensorBoard logdir of `n` runs started a day apart; run-2 has a loss spike at step 150."""
    for k in range(n):
        points = [(s, "train/loss", 3.0 * (0.99 ** s) + 0.01 * (s % 3)) for s in range(300)]
        if k == 2:
            points[150] = (150, "train/loss", 40.0)
        start = 1_700_000_000 + 86400 * k
        tb_write(root / f"run-{k}", points, start=start)
        # named as the writer names it on the day the run started (the listing's start)
        event = next((root / f"run-{k}").iterdir())
        event.rename(event.with_name(f"events.out.tfevents.{start}.host.{k}.0"))
    return root


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_scan_lists_every_run_newest_first_with_what_analyze_found(tmp_path, cache):
    store = make_store(tmp_path / "logs")
    rows, figures = scan(str(store), jobs=2)
    assert [r["id"] for r in rows] == ["run-3", "run-2", "run-1", "run-0"]
    assert figures == {**figures, "runs": 4, "analyzed": 4, "cached": 0, "workers": 2}
    spiked = rows[1]
    assert spiked["incidents"] >= 1 and spiked["kind"] == "spike" and spiked["step"] == 150
    assert spiked["top_cause"] and all(r["incidents"] == 0 for r in rows if r["id"] != "run-2")
    assert cache_dir() == cache / "postmortem" / "runs" and len(list(cache_dir().rglob("*.json"))) == 4


def test_a_rescan_analyzes_only_the_runs_that_changed(tmp_path, cache):
    store = make_store(tmp_path / "logs")
    first, _ = scan(str(store), jobs=1)
    again, figures = scan(str(store), jobs=1)
    assert figures["cached"] == 4 and figures["analyzed"] == 0 and again == first
    event = next((store / "run-1").iterdir())
    tb_write(store / "run-1", [(s, "train/loss", 9.0) for s in range(300, 310)], start=1.7e9 + 86400 + 300)
    _, figures = scan(str(store), jobs=1)
    assert figures["cached"] == 3 and figures["analyzed"] == 1
    os.utime(event, ns=(1, 1))                  # the same bytes, another mtime: analyzed again
    _, figures = scan(str(store), jobs=1)
    assert figures["analyzed"] == 1
    _, figures = scan(str(store), jobs=1, use_cache=False)
    assert figures["analyzed"] == 4
    assert len(list(cache_dir().rglob("*.json"))) == 4      # one row a run, changed or not


def test_an_unreadable_run_is_a_row_not_the_end_of_the_scan(tmp_path, cache):
    store = make_store(tmp_path / "logs", n=2)
    (store / "run-9").mkdir()
    (store / "run-9" / "metrics.csv").write_text("step,loss\n0,1.0\n1,n/a\n")
    rows, _ = scan(str(store), jobs=1)
    bad = next(r for r in rows if r["id"] == "run-9")
    assert bad["incidents"] is None and "line 3" in bad["error"]
    assert sum(r["error"] is None for r in rows) == 2


@pytest.mark.slow        # starts postmortem processes
def test_cli_runs_json_and_table(tmp_path):
    store = make_store(tmp_path / "logs", n=3)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "postmortem", "runs", str(store), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=300, env=env)
    r = run("--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [x["id"] for x in data["runs"]] == ["run-2", "run-1", "run-0"]
    assert data["runs"][0]["kind"] == "spike" and "3 analyzed" in r.stderr
    r = run()
    assert r.returncode == 0 and "3 from the cache" in r.stderr
    assert "spike at step 150" in r.stdout.splitlines()[1]
    r = subprocess.run([sys.executable, "-m", "postmortem", "runs", str(tmp_path / "nothing")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_a_store_that_is_one_unreadable_file_is_refused_not_scanned(tmp_path, cache):
    from postmortem.errors import RunReadError
    note = tmp_path / "note.txt"
    note.write_text("hello\n")
    with pytest.raises(RunReadError, match="unknown format"):
        scan(str(note))
    with pytest.raises(RunReadError, match="no such file"):
        scan(str(tmp_path / "nothing"))


def tensorboard_runs(store):
    for k in range(2):
        tb_write(store / f"run-{k}", [(s, "train/loss", 3.0 * 0.999 ** s) for s in range(20_000)])
    return "tfevents"


def mlflow_file_store_runs(store):
    """Two runs laid out as MLflow's file store writes them (meta.yaml, metrics/<key>)."""
    for k in range(2):
        run = store / "0" / f"{k:032x}"
        (run / "metrics").mkdir(parents=True)
        (run / "meta.yaml").write_text(f"run_id: {run.name}\nrun_name: r{k}\nstart_time: {1_700_000_000_000 + k}\n"
                                       "status: 3\nlifecycle_stage: active\n")
        (run / "metrics" / "loss").write_text("".join(f"{1_700_000_000_000 + s} {3.0 * 0.999 ** s} {s}\n"
                                                      for s in range(20_000)))
    return "metrics"


@pytest.mark.parametrize("write", [tensorboard_runs, mlflow_file_store_runs])
def test_a_rescan_of_unchanged_runs_reads_none_of_their_data(tmp_path, cache, monkeypatch, write):
    """The listing a scan makes counts no steps (each row's steps come from its analysis, or the
    cache): a rescan of runs that did not change reads no more of their files than the heads
    that recognise them, whatever their size."""
    import builtins
    import io
    store = tmp_path / "logs"
    data = write(store)
    size = sum(p.stat().st_size for p in store.rglob("*") if data in str(p) and p.is_file())
    first, _ = scan(str(store), jobs=1)
    read = []
    real_open = io.open

    class Counted:
        """A file whose reads are counted (what the listing and the cache lookups read)."""

        def __init__(self, f):
            self.f = f

        def read(self, *args):
            data = self.f.read(*args)
            read.append(len(data))
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    def watched(file, *args, **kwargs):
        f = real_open(file, *args, **kwargs)
        return Counted(f) if data in str(file) else f
    monkeypatch.setattr(io, "open", watched)
    monkeypatch.setattr(builtins, "open", watched)
    again, figures = scan(str(store), jobs=1)
    assert figures["cached"] == 2 and again == first
    assert sum(read) < size / 20, (sum(read), size)


def test_the_table_names_runs_whose_store_names_them(tmp_path, cache, capsys):
    """An MLflow store's ids are 32 hex digits: the table shows each run's name beside its id."""
    from postmortem.cli.parser import main
    store = tmp_path / "mlruns"
    mlflow_file_store_runs(store)
    assert main(["runs", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["ID", "NAME", "START"]
    assert [line.split()[1] for line in lines[1:]] == ["r1", "r0"]       # newest first


def test_the_cache_knows_a_store_however_its_path_is_spelled(tmp_path, cache, monkeypatch):
    """A rescan from another folder, or with the store's whole path, is still a rescan."""
    store = make_store(tmp_path / "logs", n=2)
    monkeypatch.chdir(tmp_path)
    scan("logs", jobs=1)
    _, figures = scan(str(store), jobs=1)
    assert figures["cached"] == 2 and figures["analyzed"] == 0
    monkeypatch.chdir(store)
    _, figures = scan(".", jobs=1)
    assert figures["cached"] == 2 and figures["analyzed"] == 0
