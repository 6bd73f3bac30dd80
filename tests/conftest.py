import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL_RUNS = ROOT.parent / "shared" / "real_runs"
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def real_runs() -> Path:
    if not REAL_RUNS.is_dir():
        pytest.skip(f"{REAL_RUNS} is not beside the checkout")
    return REAL_RUNS
