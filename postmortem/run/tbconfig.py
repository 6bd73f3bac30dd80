"""The config a TensorBoard log carries: the hparams plugin's session start (add_hparams,
Lightning, Keras' hparams API) and HF Trainer's `args/text_summary` and
`model_config/text_summary` text (its TrainingArguments and model config as JSON)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from postmortem.run.protowire import ProtoError, as_double, fields, submessages

_HEAD = 4 << 20            # config events come first: only each file's head is looked at
_TEXT_TAGS = {"args/text_summary": "TensorBoard args/text_summary",
              "model_config/text_summary": "TensorBoard model_config/text_summary"}
HParam = float | str | bool | None     # a google.protobuf.Value that the hparams plugin writes


def _records(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > len(data):
            return
        yield data[pos + 12:pos + 12 + length]
        pos += 16 + length


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _hparam_value(raw: bytes) -> HParam:
    """google.protobuf.Value: null 1, number 2, string 3, bool 4."""
    for field in fields(raw):
        match field:
            case (2, 1, bytes() as number):
                return as_double(number)
            case (3, 2, bytes() as text):
                return _text(text)
            case (4, 0, int() as flag):
                return bool(flag)
    return None


def _hparam_entry(entry: bytes) -> tuple[str | None, HParam]:
    """One map entry of SessionStartInfo.hparams: key 1, Value 2."""
    key, value = None, None
    for field in fields(entry):
        match field:
            case (1, 2, bytes() as k):
                key = _text(k)
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


def _plugin_data(metadata: bytes, plugin: str | None, content: bytes | None
                 ) -> tuple[str | None, bytes | None]:
    """SummaryMetadata.plugin_data (1): (plugin name 1, content 2), over what came before."""
    for field in fields(metadata):
        match field:
            case (1, 2, bytes() as data):
                for data_field in fields(data):
                    match data_field:
                        case (1, 2, bytes() as name):
                            plugin = _text(name)
                        case (2, 2, bytes() as c):
                            content = c
    return plugin, content


def _value_config(value: bytes) -> tuple[str | None, dict[str, Any]]:
    """One Summary.Value: (where, config) for a hparams session start or an HF text summary."""
    tag, plugin, content, text = None, None, None, None
    for field in fields(value):
        match field:
            case (1, 2, bytes() as t):
                tag = _text(t)
            case (9, 2, bytes() as metadata):                # SummaryMetadata
                plugin, content = _plugin_data(metadata, plugin, content)
            case (8, 2, bytes() as tensor):                  # TensorProto.string_val (8)
                for tensor_field in fields(tensor):
                    match tensor_field:
                        case (8, 2, bytes() as string):
                            text = string
    if plugin == "hparams" and content:
        hp = _session_hparams(content)
        return ("TensorBoard hparams", hp) if hp else (None, {})
    if tag in _TEXT_TAGS and text:
        try:
            cfg = json.loads(text)
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
            for rec in _records(data):
                for summary in submessages(rec, 5):                # Event.summary
                    for value in submessages(summary, 1):          # Summary.value
                        where, cfg = _value_config(value)
                        if where:
                            found.setdefault(where, {}).update(cfg)
        except (ProtoError, ValueError, IndexError, struct.error):
            continue
    order = ("TensorBoard args/text_summary", "TensorBoard hparams", "TensorBoard model_config/text_summary")
    return [(w, found[w]) for w in order if w in found]
