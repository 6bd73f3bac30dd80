"""An MLflow tracking server (`http://host:port`), read through MLflow's own client (the optional
extra `mlflow`): its runs listed, one run's metric histories read as the database reader reads
rows. The client is imported only here, when a URI is given."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from postmortem.errors import RunReadError
from postmortem.run.assemble import Series
from postmortem.run.mlflow import MetricRow, series_from_rows
from postmortem.run.model import Source
from postmortem.run.store import StoredRun

if TYPE_CHECKING:      # the client itself is imported only when a URI is read
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

_STATUS = {"RUNNING": "running", "SCHEDULED": "scheduled", "FINISHED": "finished",
           "FAILED": "failed", "KILLED": "killed"}


def is_uri(text: object) -> bool:
    return isinstance(text, str) and text.split("://", 1)[0].lower() in ("http", "https")


def _client(uri: str) -> MlflowClient:
    # bounded waits: a server that is down is said in seconds, not after minutes of retries
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    try:
        from mlflow.tracking import MlflowClient  # noqa: PLC0415 - the optional client, only for a URI
    except ImportError:
        raise RunReadError(uri, "reading an MLflow server needs MLflow's client: "
                                "pip install 'postmortem[mlflow]'") from None
    return MlflowClient(tracking_uri=uri)


def _fail(uri: str, err: Exception) -> RunReadError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return RunReadError(uri, f"the MLflow server did not answer as expected: {first[:200]}")


# a listing of this many runs or fewer counts each run's steps (one request a run); more are
# listed without (`postmortem runs URI` counts them as it reads them)
COUNTED = 41


def _steps(client: MlflowClient, run: Run) -> int | None:
    """The distinct steps of the run's loss (else its first metric), as its history says."""
    keys = list(run.data.metrics)
    if not keys:
        return 0
    key = next((k for k in keys if "loss" in k.lower()), keys[0])
    return len({m.step for m in client.get_metric_history(run.info.run_id, key)})


def server_runs(uri: str, count_steps: bool = True) -> list[StoredRun]:
    """Every run of every experiment on the server, newest first; each one's steps counted when
    `count_steps` and the server holds no more than COUNTED runs."""
    client = _client(uri)
    try:
        exps = {e.experiment_id: e.name for e in client.search_experiments()}
        runs: list[Run] = []
        token: str | None = None
        while True:
            page = client.search_runs(list(exps), max_results=1000, page_token=token,
                                      order_by=["attributes.start_time DESC"])
            runs += page
            token = page.token
            if not token:
                break
        steps = {r.info.run_id: _steps(client, r) for r in runs} if count_steps and len(runs) <= COUNTED else {}
    except Exception as err:            # the client's errors: connection, HTTP, MlflowException
        raise _fail(uri, err) from None
    out: list[StoredRun] = []
    for r in runs:
        name = r.info.run_name or ""
        out.append(StoredRun(r.info.run_id, name="/".join(x for x in (exps.get(r.info.experiment_id), name) if x),
                             start=r.info.start_time / 1000 if r.info.start_time else None,
                             steps=steps.get(r.info.run_id), status=_STATUS.get(r.info.status, str(r.info.status).lower()),
                             aliases={name} if name else set(),
                             stamp="" if r.info.status == "RUNNING" else f"{r.info.status}-{r.info.end_time}"))
    return out


def read_server_run(uri: str, run_id: str, source: Source) -> list[Series]:
    """The run's metric histories, params and tags, as the database reader shapes them."""
    client = _client(uri)
    try:
        run = client.get_run(run_id)
        rows: list[MetricRow] = []
        for key in run.data.metrics:
            rows += [(m.key, m.timestamp, m.step, m.value, False)
                     for m in client.get_metric_history(run_id, key)]
    except Exception as err:
        raise _fail(uri, err) from None
    source.extras["mlflow_run_id"] = run_id
    source.extras["params"] = dict(run.data.params)
    source.extras["tags"] = dict(run.data.tags)
    if run.info.run_name:
        source.extras["mlflow_run_name"] = run.info.run_name
    if not rows:
        raise RunReadError(uri, f"MLflow run {run_id} logged no metrics")
    keys = {k: i for i, k in enumerate(run.data.metrics)}
    rows.sort(key=lambda r: (r[1], keys[r[0]]))       # the order they were logged in
    return series_from_rows(rows, source)
