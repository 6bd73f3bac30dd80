"""The config a TensorBoard log carries: the hparams plugin's session start (add_hparams,
Lightning, Keras' hparams API) and HF Trainer's `args/text_summary` and
`model_config/text_summary` text (its TrainingArguments and model config as JSON)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from postmortem.run.protowire import ProtoError, as_double, fields, plugin_data, records, submessages, text

_HEAD = 4 << 20            # config events come first: only each file's head is looked at
_TEXT_TAGS = {"args/text_summary": "TensorBoard args/text_summary",
              "model_config/text_summary": "TensorBoard model_config/text_summary"}
HParam = float | str | bool | None     # a google.protobuf.Value that the hparams plugin writes


def _hparam_value(raw: bytes) -> HParam:
    """google.protobuf.Value: null 1, number 2, string 3, bool 4."""
    for field in fields(raw):
        match field:
            case (2, 1, bytes() as number):
                return as_double(number)
            case (3, 2, bytes() as string):
                return text(string)
            case (4, 0, int() as flag):
                return bool(flag)
    return None


def _hparam_entry(entry: bytes) -> tuple[str | None, HParam]:
    """One map entry of SessionStartInfo.hparams: key 1, Value 2."""
    key, value = None, None
    for field in fields(entry):
        match field:
            case (1, 2, bytes() as k):
                key = text(k)
            case (2, 2, bytes() as v):
                value = _hparam_value(v)
    return key, value


def _session_hparams(content: bytes) -> dict[str, HParam]:
    """HParamsPluginData.session_start_info (3) -> SessionStartInfo.hparams (1), a map."""
    out: dict[str, HParam] = {}
    for field in fields(content):
        match field:
            case (3, 2, bytes() as start):
                for entry_field in fields(start):
                    match entry_field:
                        case (1, 2, bytes() as entry):
                            key, value = _hparam_entry(entry)
                            if key is not None:
                                out[key] = value
    return out


def _value_config(value: bytes) -> tuple[str | None, dict[str, Any]]:
    """One Summary.Value: (where, config) for a hparams session start or an HF text summary."""
    tag, plugin, content, summary = None, None, None, None
    for field in fields(value):
        match field:
            case (1, 2, bytes() as t):
                tag = text(t)
            case (9, 2, bytes() as metadata):                # SummaryMetadata
                plugin, content = plugin_data(metadata, plugin, content)
            case (8, 2, bytes() as tensor):                  # TensorProto.string_val (8)
                for tensor_field in fields(tensor):
                    match tensor_field:
                        case (8, 2, bytes() as string):
                            summary = string
    if plugin == "hparams" and content:
        hp = _session_hparams(content)
        return ("TensorBoard hparams", hp) if hp else (None, {})
    if tag in _TEXT_TAGS and summary:
        try:
            cfg = json.loads(summary)
        except (ValueError, RecursionError):
            return None, {}
        return (_TEXT_TAGS[tag], cfg) if isinstance(cfg, dict) else (None, {})
    return None, {}


def tensorboard_configs(files: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """(where, config) found in the heads of the event files."""
    found: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            with open(path, "rb") as f:
                data = f.read(_HEAD)
        except OSError:
            continue
        if b"hparams" not in data and b"text_summary" not in data:
            continue
        try:
            for rec in records(data):
                for summary in submessages(rec, 5):                # Event.summary
                    for value in submessages(summary, 1):          # Summary.value
                        where, cfg = _value_config(value)
                        if where:
                            found.setdefault(where, {}).update(cfg)
        except (ProtoError, ValueError, IndexError, struct.error):
            continue
    order = ("TensorBoard args/text_summary", "TensorBoard hparams", "TensorBoard model_config/text_summary")
    return [(w, found[w]) for w in order if w in found]
