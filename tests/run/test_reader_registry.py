"""The reader registry (run/readers.py): a format is one module and one entry; every entry
reads into a RunLog; the order of the entries is the order files are recognised in."""

import json

import numpy as np
import pytest

from postmortem.cli.options import format_names
from postmortem.errors import RunReadError
from postmortem.run import discover, listing, logconfig, read_run, readers, storerows
from postmortem.run.assemble import Series
from postmortem.run.model import RunLog
from postmortem.run.store import SeveralRuns

# --- a format of our own, registered the way a new one would be --------------------------

MAGIC = b"#toylog 1\n"


def toy_recognise(probe):
    return "toylog" if probe.head.startswith(MAGIC) else None


def toy_series(cand, source):
    """`step loss` per line, after the magic line."""
    rows = [line.split() for line in cand.files[0].read_text().splitlines()[1:] if line.strip()]
    steps = np.array([int(r[0]) for r in rows])
    return [Series("loss", np.arange(len(rows)), steps, np.array([float(r[1]) for r in rows]))]


TOY = readers.Entry("toylog", toy_recognise, readers.built(toy_series))


@pytest.fixture
def toy_registered(monkeypatch):
    """The registry with the toy format before the text logs (which would claim its lines)."""
    at = [r.name for r in readers.REGISTRY].index("text")
    monkeypatch.setattr(readers, "REGISTRY", [*readers.REGISTRY[:at], TOY, *readers.REGISTRY[at:]])


def toy_file(path, steps=range(10)):
    path.write_bytes(MAGIC + "".join(f"{s} {3.0 - s / 10}\n" for s in steps).encode())
    return path


def test_a_new_format_is_one_entry_and_reads_through_read_run(tmp_path, toy_registered):
    log = read_run(toy_file(tmp_path / "train.toy"))
    assert isinstance(log, RunLog) and log.source.format == "toylog"
    assert log.frame["step"].tolist() == list(range(10))
    assert log.frame["loss"].tolist() == pytest.approx([3.0 - s / 10 for s in range(10)])


def test_a_new_format_is_found_in_a_folder_and_named_by_format(tmp_path, toy_registered):
    run = tmp_path / "run"
    run.mkdir()
    toy_file(run / "train.toy")
    assert "toylog" in format_names()
    assert read_run(run).source.format == "toylog"
    assert read_run(run, "toylog").frame["step"].iloc[-1] == 9


def test_without_its_entry_the_new_format_is_not_read(tmp_path):
    with pytest.raises(RunReadError):
        read_run(toy_file(tmp_path / "train.toy"), "toylog")
    assert "toylog" not in format_names()


# --- every entry ---------------------------------------------------------------------------

def test_every_format_of_the_registry_is_a_format_choice_and_nothing_else_is():
    names = [f for r in readers.REGISTRY for f in r.formats]
    assert sorted(names) == sorted(format_names()) and len(set(names)) == len(names)
    for r in readers.REGISTRY:
        # the text entry answers for its dialects; the side files are nobody's format
        assert r.name in format_names() or r.name in ("text", "side-files"), r.name
    # the names --format shows, in the order it has always shown them
    assert format_names()[:9] == ("jsonl", "csv", "parquet", "hf-trainer-state", "lightning",
                                  "tensorboard", "mlflow", "mlflow-db", "wandb")


def test_the_registry_is_in_the_order_files_were_always_recognised():
    assert [r.name for r in readers.REGISTRY] == [
        "wandb", "mlflow-db", "mlflow", "parquet", "tensorboard", "side-files", "hf-trainer-state",
        "jsonl", "lightning", "csv", "text"]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_an_ambiguous_file_goes_to_the_first_entry_that_recognises_it(tmp_path):
    version = tmp_path / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    (version / "metrics.csv").write_text("step,loss\n0,1.0\n1,0.9\n")
    (tmp_path / "table.csv").write_text("step,loss\n0,1.0\n1,0.9\n")
    state = {"global_step": 2, "log_history": [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.9}]}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    write_rows(tmp_path / "manifest.json", [{"step": 0, "loss": 1.0}])      # a side file, never a log
    write_rows(tmp_path / "metrics.jsonl", [{"step": 0, "loss": 1.0}])
    assert readers.format_of(version / "metrics.csv") == "lightning"
    assert readers.format_of(tmp_path / "table.csv") == "csv"
    assert readers.format_of(tmp_path / "trainer_state.json") == "hf-trainer-state"
    assert readers.format_of(tmp_path / "manifest.json") is None
    assert readers.format_of(tmp_path / "metrics.jsonl") == "jsonl"
    (tmp_path / "other.db").write_bytes(b"SQLite format 3\x00" + bytes(100))   # not MLflow's: nobody's
    assert readers.format_of(tmp_path / "other.db") is None


def test_every_entry_reads_a_run_into_a_runlog(tmp_path):
    version = tmp_path / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    (version / "metrics.csv").write_text("step,loss\n0,1.0\n1,0.9\n")
    (tmp_path / "t.csv").write_text("step,loss\n0,1.0\n1,0.9\n")
    write_rows(tmp_path / "m.jsonl", [{"step": 0, "loss": 1.0}, {"step": 1, "loss": 0.9}])
    state = {"log_history": [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.9}]}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    (tmp_path / "train.log").write_text("".join(f"step {s} | loss: {3 - s / 10:.3f} | lr: 1e-3\n"
                                                for s in range(20)))
    for path, fmt in [(version / "metrics.csv", "lightning"), (tmp_path / "t.csv", "csv"),
                      (tmp_path / "m.jsonl", "jsonl"), (tmp_path / "trainer_state.json", "hf-trainer-state"),
                      (tmp_path / "train.log", None)]:
        log = read_run(path)
        assert isinstance(log, RunLog) and "loss" in log.frame, path
        assert fmt is None or log.source.format == fmt


# --- what the registry answers beyond reading: config, listing, copies ---------------------

CONF_MAGIC = b"#toyconf 1\n"


def toyconf_series(cand, source):
    """Like the toy format, with `#` lines of its own (a printed Namespace among them)."""
    rows = [line.split() for line in cand.files[0].read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    steps = np.array([int(r[0]) for r in rows])
    return [Series("loss", np.arange(len(rows)), steps, np.array([float(r[1]) for r in rows]))]


def toyconf_row(cand, base, run):
    run.name = f"toy run {cand.files[0].stem}"
    return run


TOYCONF = readers.Entry("toyconf", lambda probe: "toyconf" if probe.head.startswith(CONF_MAGIC) else None,
                        readers.built(toyconf_series), describe=storerows.each(toyconf_row),
                        copies_beside=True)


@pytest.fixture
def toyconf_registered(monkeypatch):
    at = [r.name for r in readers.REGISTRY].index("text")
    monkeypatch.setattr(readers, "REGISTRY", [*readers.REGISTRY[:at], TOYCONF, *readers.REGISTRY[at:]])


def toyconf_file(path):
    path.write_bytes(CONF_MAGIC + b"#Namespace(lr=0.25, batch_size=7)\n"
                     + "".join(f"{s} {3.0 - s / 10}\n" for s in range(10)).encode())
    return path


def test_a_new_structured_format_gets_no_text_log_argument_parsing(tmp_path, toyconf_registered):
    log = read_run(toyconf_file(tmp_path / "train.toy"))
    assert log.source.format == "toyconf" and log.frame["step"].iloc[-1] == 9
    assert [where for where, _ in logconfig.configs(log)] == []
    # the same line in a text log is its printed arguments
    text = tmp_path / "train.log"
    text.write_text("Namespace(lr=0.25, batch_size=7)\n" + "".join(
        f"step {s} | loss: {3 - s / 10:.3f} | lr: 1e-3\n" for s in range(20)))
    assert ("the log's printed arguments", {"lr": 0.25, "batch_size": 7}) in logconfig.configs(read_run(text))


def test_a_new_format_is_listed_by_its_own_describe(tmp_path, toyconf_registered):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        toyconf_file(tmp_path / name / f"{name}.toy")
    with pytest.raises(SeveralRuns) as refused:
        read_run(tmp_path)
    assert sorted((r.id, r.name) for r in refused.value.runs) == [("a", "toy run a"), ("b", "toy run b")]


def test_a_new_format_whose_writer_leaves_copies_reads_them_once(tmp_path, toyconf_registered):
    toyconf_file(tmp_path / "scalars.toy")
    toyconf_file(tmp_path / "20240321_113341.toy")
    log = read_run(tmp_path)
    assert log.source.format == "toyconf" and log.frame["step"].iloc[-1] == 9
    kept = discover.find_candidates(tmp_path)
    assert len(kept) == 1 and kept[0].notes[0].endswith(".toy; read once"), kept
    assert [r.name for r in listing.describe(kept, tmp_path)] == [f"toy run {kept[0].files[0].stem}"]
