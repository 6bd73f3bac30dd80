"""The config a TensorBoard log carries: the hparams plugin's session start (add_hparams,
Lightning, Keras' hparams API) and HF Trainer's `args/text_summary` and
`model_config/text_summary` text (its TrainingArguments and model config as JSON)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from postmortem.run.protowire import ProtoError, as_double, fields

_HEAD = 4 << 20            # config events come first: only each file's head is looked at
_TEXT_TAGS = {"args/text_summary": "TensorBoard args/text_summary",
              "model_config/text_summary": "TensorBoard model_config/text_summary"}


def _records(data: bytes):
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > len(data):
            return
        yield data[pos + 12:pos + 12 + length]
        pos += 16 + length


def _hparam_value(raw: bytes):
    """google.protobuf.Value: null 1, number 2, string 3, bool 4."""
    for num, wire, v in fields(raw):
        if num == 2 and wire == 1:
            return as_double(v)
        if num == 3 and wire == 2:
            return v.decode("utf-8", "replace")
        if num == 4 and wire == 0:
            return bool(v)
    return None


def _session_hparams(content: bytes) -> dict:
    """HParamsPluginData.session_start_info (3) -> SessionStartInfo.hparams (1), a map."""
    out = {}
    for num, wire, v in fields(content):
        if num != 3 or wire != 2:
            continue
        for f, w, entry in fields(v):
            if f != 1 or w != 2:
                continue
            key, value = None, None
            for ef, ew, ev in fields(entry):
                if ef == 1 and ew == 2:
                    key = ev.decode("utf-8", "replace")
                elif ef == 2 and ew == 2:
                    value = _hparam_value(ev)
            if key is not None:
                out[key] = value
    return out


def _value_config(value: bytes) -> tuple[str | None, dict]:
    """One Summary.Value: (where, config) for a hparams session start or an HF text summary."""
    tag, plugin, content, text = None, None, None, None
    for f, w, x in fields(value):
        if f == 1 and w == 2:
            tag = x.decode("utf-8", "replace")
        elif f == 9 and w == 2:                       # SummaryMetadata.plugin_data
            for mf, mw, mx in fields(x):
                if mf == 1 and mw == 2:
                    for pf, pw, px in fields(mx):
                        if pf == 1 and pw == 2:
                            plugin = px.decode("utf-8", "replace")
                        elif pf == 2 and pw == 2:
                            content = px
        elif f == 8 and w == 2:                       # TensorProto.string_val (8)
            for tf, tw, tx in fields(x):
                if tf == 8 and tw == 2:
                    text = tx
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


def tensorboard_configs(files: list[Path]) -> list[tuple[str, dict]]:
    """(where, config) found in the heads of the event files."""
    found: dict[str, dict] = {}
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
                for num, wire, summary in fields(rec):
                    if num != 5 or wire != 2:
                        continue
                    for vnum, vwire, value in fields(summary):
                        if vnum == 1 and vwire == 2:
                            where, cfg = _value_config(value)
                            if where:
                                found.setdefault(where, {}).update(cfg)
        except (ProtoError, ValueError, IndexError, struct.error):
            continue
    order = ("TensorBoard args/text_summary", "TensorBoard hparams", "TensorBoard model_config/text_summary")
    return [(w, found[w]) for w in order if w in found]
