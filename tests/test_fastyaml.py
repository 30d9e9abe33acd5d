"""The event-driven inventory loader builds exactly what PyYAML's safe loader builds, or steps aside."""

from __future__ import annotations

import pytest
import yaml

from upi.inventory import fastyaml
from upi.inventory.loader import _parse, _SafeLoader

SAME = [
    "a: 1\nb: [x, 'y', \"z\", 2.5, -3, 0x1f, 0o17, 017, 1_000, 1:30]\n",
    "t: [true, yes, On, no, False, off, ~, null, Null, '', \"\"]\n",
    "when: 2001-12-14t21:59:43.10-05:00\nday: 2002-12-14\nnan: .nan\ninf: -.inf\n",
    "nodes:\n  - {name: w-0, ip: 10.40.0.9, mac: \"b8:ce:f6:00:00:01\", gpu: true}\n"
    "  - name: w-1\n    labels: {a: b}\n    disks: []\n    extra: {}\n",
    "text: |\n  two\n  lines\nfolded: >\n  one\n  line\nquoted: 'it''s'\n",
    "version: \"4.16\"\nnested: [[1, [2, [3]]], {a: {b: {c: d}}}]\n",
    "# only a comment\nk: v # trailing\n",
    "---\nk: v\n...\n",
    "big: 123456789012345678901234567890\nneg: -0\nexp: 1e3\nflt: 6.8523015e+5\n",
]

UNUSUAL = [
    "a: &x 1\nb: *x\n",  # anchors and aliases: the graph check runs on the full path
    "a: 1\na: 2\n",  # duplicate keys: reported with lines
    "1: one\n",  # a non-name key
    "yes: true\n",
    "? [a, b]\n: c\n",
    "a: !!str 1\n",  # explicit tags
    "a: !custom x\n",
    "<<: {a: 1}\n",
    "a: 1\n---\nb: 2\n",  # two documents
    "",  # empty
    "a: [1, 2\n",  # a syntax error: the full path reports it
    f"n: {'9' * 5000}\n",  # too long for int(): the full path locates it
]


def _fast(text: str) -> object:
    loader = _SafeLoader(text)
    try:
        return fastyaml.load(loader)
    finally:
        loader.dispose()


@pytest.mark.parametrize("text", SAME)
def test_same_values_and_types_as_safe_load(text: str) -> None:
    want = yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - SafeLoader
    got = _fast(text)
    assert got == want or (repr(got) == repr(want))  # .nan != .nan
    assert repr(got) == repr(want)  # same types all the way down (True vs 1, '017' vs 15)


@pytest.mark.parametrize("text", UNUSUAL)
def test_anything_unusual_takes_the_full_path(text: str) -> None:
    with pytest.raises(fastyaml.Unusual):
        _fast(text)


def test_lines_of_a_fast_loaded_inventory_come_from_the_text() -> None:
    data, lines = _parse("cluster:\n  name: x\nnodes:\n  - name: a\n    ip: 1.2.3.4\n", "inv.yaml")
    assert data == {"cluster": {"name": "x"}, "nodes": [{"name": "a", "ip": "1.2.3.4"}]}
    assert lines.line_of(("nodes", 0, "ip")) == 5
    assert lines.line_of(("cluster", "missing")) == 1
