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


_SKIP = object()
_FRAMING = (StreamStartEvent, DocumentStartEvent, DocumentEndEvent)


def load(loader: Any) -> Any:
    """The single document `loader` parses, or Unusual (nothing reported: the full path does)."""
    plain: dict[str, Any] = {}  # plain scalar text -> its value (the resolver runs once per text)
    stack: list[Any] = []  # _Map or list, innermost last
    done: list[Any] = []
    try:
        while not loader.check_event(StreamEndEvent):
            event = loader.get_event()
            value = _step(loader, plain, stack, event)
            if value is _SKIP:
                continue
            if stack:
                _add(stack[-1], value, type(event) is ScalarEvent)
            else:
                done.append(value)
    except yaml.YAMLError:
        raise Unusual from None
    if len(done) != 1:
        raise Unusual  # empty, or more than one document: the full path names it
    return done[0]


def _step(loader: Any, plain: dict[str, Any], stack: list[Any], event: Any) -> Any:
    """The value `event` completes, or _SKIP (a collection opened, framing)."""
    kind = type(event)
    if kind in _FRAMING:
        return _SKIP
    if kind is MappingEndEvent:
        return stack.pop().data
    if kind is SequenceEndEvent:
        return stack.pop()
    if kind not in (ScalarEvent, MappingStartEvent, SequenceStartEvent):
        raise Unusual  # an alias, or anything new
    if event.anchor is not None or event.tag is not None:
        raise Unusual  # anchors (the graph check) and explicit tags: the full path
    if kind is ScalarEvent:
        return _plain(loader, plain, event) if event.implicit[0] else event.value
    stack.append(_Map() if kind is MappingStartEvent else [])
    return _SKIP


def _add(top: Any, value: Any, scalar: bool) -> None:
    if type(top) is list:
        top.append(value)
    elif top.key is not None:
        top.data[top.key] = value
        top.key = None
    elif scalar and type(value) is str and value not in top.data:
        top.key = value
    else:
        raise Unusual  # a non-name key or a duplicate: the full path reports it


def _plain(loader: Any, cache: dict[str, Any], event: ScalarEvent) -> Any:
    text = event.value
    try:
        return cache[text]
    except KeyError:
        pass
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    if tag == STR_TAG:
        value: Any = text
    else:
        node = yaml.ScalarNode(tag, text, None, None)  # a constructor error falls back anyway
        value = loader.construct_object(node)
        if isinstance(value, list | dict | set | bytearray):  # pragma: no cover - none implicit
            raise Unusual
    cache[text] = value
    return value

