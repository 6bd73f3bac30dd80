"""files.py: atomic writes with the umask's mode, one-line refusals, and the one name check."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from postmortem.files import MAX_NAME, CannotWrite, NameRefused, atomic_write, check_name, safe_name

ROOT = Path(__file__).resolve().parents[2]


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    (tmp_path / "new.txt").chmod(0o604)
    atomic_write(tmp_path / "new.txt", b"y")
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o604
    assert (tmp_path / "new.txt").read_text() == "y"
    assert [p.name for p in tmp_path.iterdir()] == ["new.txt"]          # no temp file left


@pytest.mark.slow
def test_a_write_that_cannot_be_made_is_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "file").write_text("a file where a folder goes\n")
    with pytest.raises(CannotWrite) as err:
        atomic_write(tmp_path / "file" / "x.md", "x")
    assert str(err.value).startswith(f"cannot write {tmp_path / 'file' / 'x.md'}:")
    assert isinstance(err.value, OSError) and "\n" not in str(err.value)
    r = subprocess.run([sys.executable, "-m", "postmortem", "export", ROOT / "sample_runs" / "long-tail-token",
                        "-o", tmp_path / "file" / "out.csv"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot write" in r.stderr


@pytest.mark.parametrize("bad", ["", ".", "..", "a..b", "../x", "bob\n", "a|b", "a\x00b", "a b", "-rf", ".hidden",
                                 "x" * (MAX_NAME + 1), "a/b", "é", "a\u2028b"])
def test_names_that_cannot_be_a_file_name_or_a_cell_are_refused(bad):
    with pytest.raises(NameRefused) as err:
        check_name(bad, "learner name")
    assert "\n" not in str(err.value)


@pytest.mark.slow
@given(st.text(max_size=400))
def test_safe_name_is_always_a_plain_name_and_keeps_plain_ones(text):
    safe = safe_name(text)
    assert check_name(safe) == safe
    try:
        check_name(text)
    except NameRefused:
        assert safe != text
    else:
        assert safe == text


def test_two_different_unsafe_names_stay_apart():
    assert safe_name("a b") != safe_name("a_b") and safe_name("a b") != safe_name("a  b")
