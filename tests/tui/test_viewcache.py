"""The view kept from the last opening of a run: painted at once when nothing it came from
has changed, corrected by the fresh one when it differs, never trusted when it is damaged."""

import dataclasses
import os
import pickle
import shutil
from pathlib import Path

import pytest
from pilots import opened

from postmortem.tui import viewcache
from postmortem.tui.app import PostmortemApp
from postmortem.tui.loader import Loader, same
from postmortem.tui.widgets.metric_panel import MetricPanel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "postmortem" / "views"


@pytest.fixture
def run(tmp_path) -> Path:
    """A copy of the long-tail-token sample run (its files are stamped and touched here)."""
    out = tmp_path / "run"
    shutil.copytree(ROOT / "sample_runs" / "long-tail-token", out, ignore=shutil.ignore_patterns("checkpoints"))
    return out


def open_once(run) -> tuple:
    """(first message, the run message) of one loader process."""
    loader = Loader(str(run))
    first = loader.first()
    return first, loader.run()


def tamper(cache: Path, **change) -> None:
    """Change the kept view (its stamps and code left as they are): a view kept by other code."""
    (entry,) = cache.glob("*.pickle")
    kept = pickle.loads(entry.read_bytes())
    kept["view"] = dataclasses.replace(kept["view"], **change)
    entry.write_bytes(pickle.dumps(kept))


@pytest.mark.slow
def test_a_run_opened_again_is_painted_from_the_view_kept_the_first_time(cache, run):
    (kind, view), handed = open_once(run)
    assert kind == "view" and handed[0] == "run" and handed[3] is None
    kept = viewcache.lookup(str(run), None, [], {})
    assert kept is not None and same(kept, view)
    (kind, again), handed = open_once(run)
    assert kind == "view" and same(again, view) and handed[3] is None     # no correction: it was right


@pytest.mark.slow
def test_the_kept_view_comes_first_and_a_stale_one_is_corrected(cache, run):
    (_, view), _ = open_once(run)
    tamper(cache, incidents=[])
    (kind, first), handed = open_once(run)
    assert first.incidents == [] and view.incidents                        # the kept view, sent at once
    assert handed[0] == "run" and same(handed[3], view)                    # then the fresh one
    assert same(viewcache.lookup(str(run), None, [], {}), view)            # and kept for next time


@pytest.mark.slow
def test_a_changed_run_is_read_again(cache, run):
    open_once(run)
    metrics = run / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + metrics.read_text().splitlines()[-1] + "\n")
    assert viewcache.lookup(str(run), None, [], {}) is None               # a row more: not used
    open_once(run)
    assert viewcache.lookup(str(run), None, [], {}) is not None
    (run / "notes.txt").write_text("a file added beside the metrics")
    assert viewcache.lookup(str(run), None, [], {}) is None


@pytest.mark.slow
def test_other_options_or_other_code_are_other_views(cache, run, monkeypatch):
    open_once(run)
    assert viewcache.lookup(str(run), "jsonl", [], {}) is None
    assert viewcache.lookup(str(run), None, [], {"loss": "loss"}) is None
    monkeypatch.setattr(viewcache, "code_fingerprint", lambda: "another version")
    assert viewcache.lookup(str(run), None, [], {}) is None


@pytest.mark.slow
def test_a_damaged_cache_is_not_trusted_and_an_unwritable_one_is_no_error(cache, run, tmp_path, monkeypatch):
    open_once(run)
    (entry,) = cache.glob("*.pickle")
    entry.write_bytes(entry.read_bytes()[:100])                            # cut short
    assert viewcache.lookup(str(run), None, [], {}) is None
    (kind, view), handed = open_once(run)
    assert kind == "view" and view.incidents and handed[0] == "run"
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    (kind, view), handed = open_once(run)
    assert kind == "view" and handed[0] == "run"
    assert viewcache.lookup(str(run), None, [], {}) is None


def test_only_the_most_recently_opened_views_are_kept(cache, run, monkeypatch):
    monkeypatch.setattr(viewcache, "KEPT", 2)
    for i in range(3):
        viewcache.keep(f"{run}/{i}", None, [], {}, {"a view": i}, [str(run / "metrics.jsonl")])
        os.utime(next(p for p in cache.glob("*.pickle") if pickle.loads(p.read_bytes())["view"] == {"a view": i}),
                 (1_000_000 + i, 1_000_000 + i))
    assert sorted(pickle.loads(p.read_bytes())["view"]["a view"] for p in cache.glob("*.pickle")) == [1, 2]
    # and no more bytes together than ALL: the newest stays, the next no longer fits
    monkeypatch.setattr(viewcache, "KEPT", 64)
    viewcache.keep(f"{run}/3", None, [], {}, {"a view": 3}, [str(run / "metrics.jsonl")])
    sizes = {pickle.loads(p.read_bytes())["view"]["a view"]: p.stat().st_size for p in cache.glob("*.pickle")}
    assert sorted(sizes) == [1, 2, 3]
    monkeypatch.setattr(viewcache, "ALL", sizes[3] + sizes[2] - 1)
    viewcache._prune(cache)
    assert [pickle.loads(p.read_bytes())["view"]["a view"] for p in cache.glob("*.pickle")] == [3]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_dashboard_paints_the_kept_view_then_the_fresh_one(cache, run):
    open_once(run)
    tamper(cache, incidents=[])
    app = PostmortemApp(str(run))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        # handed over means the fresh view painted, its panels in: nothing more to wait for
        assert app.dashboard.view.incidents and app.screen.query(MetricPanel)
        table = app.screen.query_one("#incidents")
        assert table.border_title.removeprefix("▶ ") == "incidents" and table.row_count == 1
        assert app.dashboard.incident.step == 250
        assert "spike at step 250" in str(app.screen.query_one("#status").render())
        panels = [p.column for p in app.screen.query(MetricPanel)]
        assert len(panels) == len(set(panels)) and "loss" in panels          # drawn once, not twice
        assert all(p.marks == [250] for p in app.screen.query(MetricPanel))


class _Evil:
    """What someone else could leave in the cache folder: a pickle that runs a command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.slow
def test_a_kept_file_that_would_run_code_is_refused_before_anything_runs(cache, run, tmp_path):
    (_, view), _ = open_once(run)
    (entry,) = cache.glob("*.pickle")
    kept = viewcache.load(entry.read_bytes())          # what the cache holds reads back as a view
    assert viewcache.lookup(str(run), None, [], {}) is not None and kept["view"].run_id == view.run_id
    marker = tmp_path / "ran"
    entry.write_bytes(pickle.dumps({"code": kept["code"], "stamps": kept["stamps"], "view": _Evil(marker)}))
    assert viewcache.lookup(str(run), None, [], {}) is None
    entry.write_bytes(pickle.dumps(_Evil(marker)))
    assert viewcache.lookup(str(run), None, [], {}) is None
    with pytest.raises(pickle.UnpicklingError, match="posix.system is not part of a view"):
        viewcache.load(entry.read_bytes())
    assert not marker.exists()
    # the loader opens the run as if nothing had been kept
    (kind, again), handed = open_once(run)
    assert kind == "view" and again.run_id == view.run_id and not marker.exists()
