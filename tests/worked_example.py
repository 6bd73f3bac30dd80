"""The worked example (learners/example/) as another learner's draft: `commit --learner ada`
takes a draft only when its front matter says ada, so the tests that commit the example as
ada's commit this copy."""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKED = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"


def as_learners(folder: Path, learner: str = "ada") -> Path:
    """A copy of the worked example and its figure in `folder`, written as `learner`'s."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = folder / WORKED.name
    # the copy is outside the checkout: it names the sample run by its whole path, so that
    # check and commit find the run to compare the numbers with
    doc.write_text(WORKED.read_text().replace("learner: example\n", f"learner: {learner}\n", 1)
                   .replace("\nrun: sample_runs/", f"\nrun: {ROOT}/sample_runs/", 1))
    shutil.copy(WORKED.with_suffix(".png"), folder)
    return doc
