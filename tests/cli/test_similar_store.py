"""`postmortem similar` pointed at a store of several runs (lightning_logs/ of two versions):
the error says so on its first line, names `similar ... --run ID` and lists the runs, exit 2;
`--run` picks one and compares it; a `--run` the store lacks is one line, exit 2."""

import json
import os
import random
import subprocess
import sys


def pm(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTMORTEM_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")       # no `postmortem init` of the user's
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def two_versions(tmp_path):
    """Lightning's CSVLogger layout, `lightning_logs/version_N/metrics.csv`, each run with a spike."""
    store = tmp_path / "lightning_logs"
    for version in (0, 1):
        rng = random.Random(version)
        rows = ["epoch,step,train_loss"] + [f"0,{i},{2.0 - i / 1000 + rng.random() * 0.01:.4f}" for i in range(300)]
        rows[201] = "0,200,9.0"
        (store / f"version_{version}").mkdir(parents=True)
        (store / f"version_{version}" / "metrics.csv").write_text("\n".join(rows) + "\n")
    return store


def test_similar_on_a_store_of_several_runs(tmp_path):
    store, kb = two_versions(tmp_path), tmp_path / "kb"
    (kb / "learners").mkdir(parents=True)
    r = pm(tmp_path, "similar", store, "--repo", kb)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    first, *listed = r.stderr.strip().splitlines()
    assert first.startswith(f"postmortem: error: {store}: holds 2 different runs")
    assert f"postmortem similar {store} --run ID" in first
    assert [line.split()[0] for line in listed] == ["version_0", "version_1"]

    r = pm(tmp_path, "similar", store, "--run", "version_1", "--repo", kb, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []                    # an empty knowledge base: no past incident

    r = pm(tmp_path, "similar", store, "--run", "nope", "--repo", kb)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"postmortem: error: {store}: --run nope is no run of it; it holds: version_0, version_1")
