"""--thresholds FILE and --set NAME=VALUE, read into Thresholds with errors that name the field
and what it takes."""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path

from postmortem.errors import UsageError


def _known(fields) -> str:
    return ", ".join(fields)


def _number(text: str, whole: bool) -> float | int | None:
    """The value of NAME=VALUE as the field takes it; None when it is not that kind of number."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    if whole:
        return int(value) if value.is_integer() else None
    return value


def _read_file(path: str, fields) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"{path}: cannot read the thresholds: {err.strerror or err}") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: not JSON: {err}") from None
    if not isinstance(data, dict):
        raise UsageError(f'{path}: thresholds are a JSON object, e.g. {{"spike_sigma": 4}}')
    for name, value in data.items():
        if name not in fields:
            raise UsageError(f"{path}: {name}: unknown threshold{_did_you_mean(name, fields)}; "
                             f"known: {_known(fields)}")
        whole = fields[name].annotation is int
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                _number(str(value), whole) is None:
            raise UsageError(f"{path}: {name}={json.dumps(value)}: "
                             f"{'not a whole number' if whole else 'not a number'}")
    return data


def _did_you_mean(name: str, fields) -> str:
    close = difflib.get_close_matches(name, list(fields), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def load_thresholds(path: str | None, overrides: list[str]):
    """The thresholds of the file, then each --set over them; a bad one is a UsageError naming it."""
    from pydantic import ValidationError

    from postmortem.diagnose.thresholds import Thresholds
    fields = Thresholds.model_fields
    data = _read_file(path, fields) if path else {}
    for item in overrides:
        name, eq, text = (part.strip() for part in item.partition("="))
        if not eq or not name:
            raise UsageError(f"--set {item}: NAME=VALUE expected, e.g. --set spike_sigma=4")
        if name not in fields:
            raise UsageError(f"--set {name}: unknown threshold{_did_you_mean(name, fields)}; "
                             f"known: {_known(fields)}")
        whole = fields[name].annotation is int
        value = _number(text, whole)
        if value is None:
            raise UsageError(f"--set {name}={text}: {'not a whole number' if whole else 'not a number'}")
        data[name] = value
    try:
        return Thresholds.model_validate(data)
    except ValidationError as err:         # what the checks above let through: said per field
        first = err.errors()[0]
        field = ".".join(map(str, first["loc"]))
        raise UsageError(f"{path or '--set'}: {field}: {first['msg']}") from None
