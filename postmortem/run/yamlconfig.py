"""YAML configs read as plain data. Lightning's hparams.yaml may hold `!!python/object` tags
(a Namespace, an enum): a safe loader refuses them, so any tag is read as the mapping, list or
scalar it wraps, and nothing is ever constructed from it.

Import this module only where a YAML config is read: PyYAML is not loaded at start-up."""

from __future__ import annotations

from typing import Any

import yaml


class PermissiveLoader(yaml.SafeLoader):
    """A safe loader that reads every unknown tag as plain data."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    assert isinstance(node, yaml.ScalarNode)       # the third and last kind of node
    return loader.construct_scalar(node)


PermissiveLoader.add_multi_constructor("", _any_tag)


def load(text: str) -> Any:
    """The YAML document in `text` as plain data; a tag never constructs an object."""
    return yaml.load(text, Loader=PermissiveLoader)     # a SafeLoader: nothing is executed
