"""The common inventory, loaded straight from libyaml's events: no node tree, no constructor.

Composing nodes and running PyYAML's constructor over them costs several
times what libyaml's parser itself does (a Python object, a resolver call and
a constructor call per value). A plain inventory -- maps, lists and untagged
scalars, no anchors or aliases, no duplicate or non-string keys -- is built
here from the events in one loop; the resolver is asked once per distinct
plain scalar, and not at all where no implicit tag can start. Anything else
raises `Unusual`, and the caller takes the full path, which checks and
reports it with its line (loader.py): the values are the same either way,
and errors stay located.
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


def load(loader: Any) -> Any:  # noqa: C901 - one hot loop: a call per event costs a third more
    """The single document `loader` parses, or Unusual (nothing reported: the full path does)."""
    plain: dict[str, Any] = {}  # plain scalar text -> its value (the resolver runs once per text)
    # The first characters an implicit tag (bool, int, null...) may start with; a plain
    # scalar starting otherwise is a string, as the resolver would find.
    starts = loader.yaml_implicit_resolvers
    stack: list[Any] = []  # dicts and lists being built, innermost last
    keys: list[Any] = []  # per open collection: the key awaiting its value (None: none; lists: _LIST)
    done: list[Any] = []
    get_event = loader.get_event
    try:
        while True:
            event = get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if event.anchor is not None or event.tag is not None:
                    raise Unusual  # anchors (the graph check) and explicit tags: the full path
                value = event.value
                if event.implicit[0] and value[:1] in starts:
                    value = plain[value] if value in plain else _plain(loader, plain, value)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                keys.pop()
                value = stack.pop()
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.tag is not None:
                    raise Unusual
                if kind is MappingStartEvent:
                    stack.append({})
                    keys.append(None)
                else:
                    stack.append([])
                    keys.append(_LIST)
                if len(stack) > 1 and keys[-2] is None:
                    raise Unusual  # a mapping or list as a key
                continue
            elif kind is StreamEndEvent:
                break
            elif kind in _FRAMING:
                continue
            else:
                raise Unusual  # an alias, or anything new
            if not stack:
                done.append(value)
                continue
            key = keys[-1]
            if key is _LIST:
                stack[-1].append(value)
            elif key is not None:
                stack[-1][key] = value
                keys[-1] = None
            elif type(value) is str and value not in stack[-1]:
                keys[-1] = value
            else:
                raise Unusual  # a non-name key or a duplicate: the full path reports it
    except yaml.YAMLError:
        raise Unusual from None
    if len(done) != 1:
        raise Unusual  # empty, or more than one document: the full path names it
    return done[0]


_LIST = object()
_FRAMING = (StreamStartEvent, DocumentStartEvent, DocumentEndEvent)


def _plain(loader: Any, cache: dict[str, Any], text: str) -> Any:
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
