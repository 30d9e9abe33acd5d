"""The common inventory, loaded straight from libyaml's events: no node tree, no constructor.

Composing nodes and running PyYAML's constructor over them costs several
times what libyaml's parser itself does (a Python object, a resolver call and
a constructor call per value). A plain inventory -- maps, lists and untagged
scalars, no anchors or aliases, no duplicate or non-string keys -- is built
here from the events in one loop, with the resolver's answer per distinct
plain scalar cached. Anything else raises `Unusual`, and the caller takes the
full path, which checks and reports it with its line (loader.py): the values
are the same either way, and errors stay located.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

STR_TAG = "tag:yaml.org,2002:str"


class Unusual(Exception):  # noqa: N818 - a signal to take the full path, not an error
    """Not a plain inventory: load it with the full composer and constructor."""


class _Map:
    """A mapping being built: its dict and the key waiting for its value."""

    __slots__ = ("data", "key")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.key: str | None = None


def load(loader: yaml.SafeLoader) -> Any:
    """The single document `loader` parses, or Unusual (nothing reported: the full path does)."""
    plain: dict[str, Any] = {}  # plain scalar text -> its value (the resolver runs once per text)
    stack: list[Any] = []  # _Map or list, innermost last
    done: list[Any] = []
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if event.anchor is not None or event.tag is not None:
                    raise Unusual
                value = _plain(loader, plain, event) if event.implicit[0] else event.value
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.tag is not None:
                    raise Unusual
                stack.append(_Map() if kind is MappingStartEvent else [])
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                top = stack.pop()
                value = top.data if kind is MappingEndEvent else top
            elif kind is StreamStartEvent or kind is DocumentStartEvent:
                if kind is DocumentStartEvent and done:
                    raise Unusual  # a second document: the full path names it
                continue
            elif kind is DocumentEndEvent:
                continue
            elif kind is StreamEndEvent:
                break
            else:  # an alias, or anything new
                raise Unusual
            if not stack:
                done.append(value)
                continue
            top = stack[-1]
            if type(top) is list:
                top.append(value)
            elif top.key is None:
                if type(value) is not str or kind is not ScalarEvent or value in top.data:
                    raise Unusual  # a non-name key or a duplicate: the full path reports it
                top.key = value
            else:
                top.data[top.key] = value
                top.key = None
    except yaml.YAMLError:
        raise Unusual from None
    if len(done) != 1:
        raise Unusual  # empty file
    return done[0]


def _plain(loader: yaml.SafeLoader, cache: dict[str, Any], event: ScalarEvent) -> Any:
    text = event.value
    try:
        return cache[text]
    except KeyError:
        pass
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    if tag == STR_TAG:
        value: Any = text
    else:
        node = yaml.ScalarNode(tag, text, event.start_mark, event.end_mark)
        value = loader.construct_object(node)
        if isinstance(value, list | dict | set | bytearray):  # pragma: no cover - no implicit tag builds these
            raise Unusual
    cache[text] = value
    return value

