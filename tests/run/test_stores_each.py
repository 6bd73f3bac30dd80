"""Issue 27, store by store: each kind of store, holding several runs and written by its
framework's own library (mmengine's by its Runner outside .venv, as it needs OpenCV, and
committed as tests/data/stores/mmengine-work-dir), lists its runs (id, name, start, steps,
status) when no run is named, opens the run `--run ID` names from the CLI (`analyze`, `info`,
`export`, `new`) and the TUI (the picker, and `tui STORE --run ID`), and reads the same values
as the framework's own reader gives back (TensorBoard's EventAccumulator, MLflow's client, HF's
TrainerState, the CSV Lightning wrote, the values W&B logged, mmengine's JSON lines)."""

from __future__ import annotations

import csv
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cli_run import one_line_error, postmortem
from test_stores_frameworks import lightning_two_fits, log_mlflow_runs, tb_write

from postmortem.cli.parser import main
from postmortem.run import read_run
from postmortem.run.store import SeveralRuns


@dataclass
class Store:
    path: Path
    truth: dict[str, np.ndarray]      # listing id -> the loss values the framework's reader gives
    by_name: dict[str, str]           # a name --run also takes -> the id it picks
    incident: str                     # a run with an incident (`new` writes about one)


def _tensorboard(root: Path) -> Store:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    logdir = root / "tb_logs"
    tb_write(logdir / "lr-1e-3", [(s, "train/loss", 3 - s / 100) for s in range(40)], start=1.7e9)
    tb_write(logdir / "lr-1e-2", [(s, "train/loss", 5 - s / 100 if s != 20 else math.nan) for s in range(30)],
             start=1.7e9 + 86400)
    truth = {}
    for run in ("lr-1e-3", "lr-1e-2"):
        acc = EventAccumulator(str(logdir / run))
        acc.Reload()
        truth[run] = np.array([e.value for e in acc.Scalars("train/loss")])
    return Store(logdir, truth, {}, "lr-1e-2")


def _lightning(root: Path) -> Store:
    logs = lightning_two_fits(root, lrs=(0.1, 3.0))       # the second diverges
    truth = {}
    for v in ("version_0", "version_1"):
        with open(logs / v / "metrics.csv", newline="") as f:
            truth[v] = np.array([float(r["train_loss"]) for r in csv.DictReader(f) if r["train_loss"]])
    return Store(logs, truth, {}, "version_1")


def _wandb(root: Path) -> Store:
    wandb = pytest.importorskip("wandb")
    truth, names = {}, {}
    for n, scale in enumerate((1.0, 2.0)):
        run = wandb.init(project="p", dir=str(root), mode="offline", id=f"run{n}abc", name=f"lr-x{scale:g}",
                         settings=wandb.Settings(console="off", x_disable_stats=True))
        values = [scale * (3 - s / 10) if s != 12 else math.inf for s in range(25)]
        for s, v in enumerate(values):
            run.log({"train/loss": v, "lr": 1e-3}, step=s)
        run.finish()
        truth[run.id], names[f"lr-x{scale:g}"] = np.array(values), run.id
    return Store(root / "wandb", truth, names, names["lr-x2"])


def _mlflow(made: dict[str, dict], uri_store: Path) -> Store:
    truth = {}
    for rid, history in made.items():
        want = np.array([v for _, v in history["train/loss"]])
        # MLflow keeps +-inf as +-DBL_MAX and its client hands them back so: the value logged is inf
        want[np.abs(want) >= np.finfo(np.float64).max] *= np.inf
        truth[rid] = want
    nan = next(rid for rid, values in truth.items() if np.isnan(values).any())
    return Store(uri_store, truth, {}, nan)


def _mlflow_db(root: Path) -> Store:
    pytest.importorskip("mlflow")
    db = root / "mlflow.db"
    return _mlflow(log_mlflow_runs(f"sqlite:///{db}"), db)


def _mlflow_files(root: Path) -> Store:
    pytest.importorskip("mlflow")
    store = root / "mlruns"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")      # MLflow 3.7+ keeps it for old stores
        return _mlflow(log_mlflow_runs(store.as_uri()), store)


MMENGINE = Path(__file__).resolve().parents[1] / "data" / "stores" / "mmengine-work-dir"


def _mmengine(root: Path) -> Store:
    """mmengine's own work dir (its Runner, twice; tests/data/stores/make_mmengine_work_dir.py):
    <timestamp>/vis_data/scalars.json and its identical <timestamp>.json, beside the text log."""
    work_dir = Path(shutil.copytree(MMENGINE, root / "work_dir"))
    truth = {}
    for run in sorted(p for p in work_dir.iterdir() if p.is_dir()):
        rows = [json.loads(x) for x in (run / "vis_data" / "scalars.json").read_text().splitlines()]
        truth[run.name] = np.array([r["loss"] for r in rows if "loss" in r])     # Infinity read as inf
    return Store(work_dir, truth, {}, "20261126_225606")      # lr 2.0: it diverges


def _hf(root: Path) -> Store:
    from transformers import TrainerState
    truth = {}
    for name, peak in (("bert-lr1", 2.0), ("bert-lr2", 4.0)):
        for step in (10, 20, 30):
            d = root / "outputs" / name / f"checkpoint-{step}"
            d.mkdir(parents=True)
            hist = [{"step": s, "loss": (peak - s / 100) * (10 if peak > 3 and s == 20 else 1),
                     "learning_rate": 1e-4, "epoch": s / 30} for s in range(1, step + 1)]
            TrainerState(global_step=step, max_steps=30, log_history=hist).save_to_json(str(d / "trainer_state.json"))
        latest = TrainerState.load_from_json(str(root / "outputs" / name / "checkpoint-30" / "trainer_state.json"))
        truth[name] = np.array([h["loss"] for h in latest.log_history])
    return Store(root / "outputs", truth, {}, "bert-lr2")


BUILDERS = {"tensorboard": _tensorboard, "lightning": _lightning, "wandb": _wandb, "mlflow-db": _mlflow_db,
            "mlflow-files": _mlflow_files, "mmengine": _mmengine, "hf": _hf}
SLOW = {"lightning", "mlflow-db", "mlflow-files", "wandb"}     # training, or MLflow's client: seconds
KINDS = [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k for k in BUILDERS]


@pytest.fixture(scope="module", params=KINDS)
def store(request, tmp_path_factory) -> Store:
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "wandb":
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("WANDB_MODE", "offline")
            mp.setenv("WANDB_SILENT", "true")
            return BUILDERS[request.param](root)
    return BUILDERS[request.param](root)


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal point for point, NaN where NaN, +-inf where +-inf."""
    np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


def loss_points(log) -> np.ndarray:
    """The loss points the run logged, in step order (a NaN logged kept, a step without a loss not)."""
    values = log.frame["loss"].to_numpy()
    return values[~np.isnan(values) | np.asarray(log.nan_mask("loss"))]


def test_a_store_of_several_runs_lists_them(store):
    with pytest.raises(SeveralRuns) as err:
        read_run(store.path)
    runs = err.value.runs
    assert sorted(r.id for r in runs) == sorted(store.truth)
    for r in runs:                      # what the listing says of each: when, how long
        assert r.start is not None and r.steps, (r.id, r.start, r.steps)
    lines = str(err.value).splitlines()
    assert len(lines) == 1 + len(runs) and "--run ID" in lines[0]


def test_each_run_reads_what_the_frameworks_own_reader_reads(store):
    for rid, want in store.truth.items():
        log = read_run(store.path, run=rid)
        assert log.source.extras["store_run"] == rid
        same(np.sort(loss_points(log)), np.sort(want))
    for name, rid in store.by_name.items():
        assert read_run(store.path, run=name).source.extras["store_run"] == rid


@pytest.mark.slow           # postmortem processes
def test_the_cli_lists_the_runs_and_opens_the_one_asked_for(store, tmp_path):
    line = one_line_error(postmortem("analyze", store.path, "--run", "no-such-run"))
    assert "no-such-run" in line and "is no run of it" in line
    r = postmortem("info", store.path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 + len(store.truth) and "info" in r.stderr
    rid, want = next(iter(store.truth.items()))
    r = postmortem("analyze", store.path, "--run", rid, "--json")
    assert r.returncode == 0, r.stderr
    r = postmortem("info", store.path, "--run", rid, "--json")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "run.csv"
    r = postmortem("export", store.path, "--run", rid, "-o", out)
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        exported = np.array([float(x["loss"]) for x in csv.DictReader(f) if x.get("loss") not in ("", None)])
    same(np.sort(exported[~np.isnan(exported)]), np.sort(want[~np.isnan(want)]))


def test_new_writes_the_run_asked_for(store, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rid = store.incident
    assert main(["new", str(store.path), "--run", rid, "--learner", "ada", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["run_in_store"] == rid


@pytest.mark.slow           # the dashboard's loader process
@pytest.mark.asyncio
async def test_the_tui_picker_and_tui_run_open_the_run_asked_for(store):
    """`postmortem tui STORE`: the picker lists the runs newest first and enter opens the one
    highlighted; `postmortem tui STORE --run ID` (the columns cmd_tui hands over) opens that one."""
    from pilots import opened

    from postmortem.tui.app import PostmortemApp
    from postmortem.tui.screens.picker import PickerScreen, runs_to_pick
    picking = runs_to_pick(str(store.path), None, f"{store.path}: holds ... --run ID ...")
    assert picking is not None and sorted(r.id for r in picking) == sorted(store.truth)
    at = [r.id for r in picking].index(store.incident)
    app = PostmortemApp(str(store.path), picking=picking)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        assert app.screen.query_one("#runs").row_count == len(store.truth)
        await pilot.press(*["down"] * at, "enter")
        await opened(app, pilot)
        assert app.session.error is None, app.session.error
        log = app.session.log
        assert log.source.extras["store_run"] == store.incident
        same(np.sort(loss_points(log)), np.sort(store.truth[store.incident]))
    other = next(rid for rid in store.truth if rid != store.incident)
    app = PostmortemApp(str(store.path), columns={"run": other})
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        assert app.session.error is None, app.session.error
        assert app.session.log.source.extras["store_run"] == other
