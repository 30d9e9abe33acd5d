"""Whatever a user does to a valid inventory, upi answers with an inventory error.

Random key deletions, value replacements and type swaps on the example
inventories: the result either validates (and then renders) or is an
InventoryError with exit 2 -- never another exception, never a traceback.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import INVENTORIES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from upi.cli import app
from upi.errors import InventoryError
from upi.inventory import parse_inventory
from upi.render import render_inventory

PLAUSIBLE = st.sampled_from([
    "", "4.10", "4.3", "4.99", "10.33.3.0/24", "10.33.3.300", "0.0.0.0/0", "100.64.0.0/10",
    "52:54:00:00:00:01", "ff:ff:ff:ff:ff:ff", "master", "bootstrap", "worker", "vm", "metal", "uefi",
    "bios", "/dev/sda", "relative/path", "http://10.0.0.1", "OpenShiftSDN", "OVNKubernetes",
    "pull-secret.json", "id_rsa.pub", "no-such-file", "api", "etcd-0",
])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
           | st.text(max_size=12) | PLAUSIBLE)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | PLAUSIBLE, inner,
                                                               max_size=3),
    max_leaves=6,
)
BASES = {name: yaml.safe_load((INVENTORIES / f"{name}.yaml").read_text())
         for name in ("dgxpod", "compact", "legacy-4.3")}


def _containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict | list):
        yield path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            yield from _containers(child, (*path, key))


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


def _swap(value: Any) -> Any:
    """The same content in another YAML type."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return {}


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(BASES[draw(st.sampled_from(sorted(BASES)))])
    for _ in range(draw(st.integers(1, 3))):
        spots = list(_containers(doc))
        parent = _at(doc, draw(st.sampled_from(spots)))
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        if not keys:
            continue
        key = draw(st.sampled_from(keys))
        op = draw(st.sampled_from(["delete", "replace", "swap"]))
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(VALUES)
        else:
            parent[key] = _swap(parent[key])
    return doc


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # Beside copies of the example's pull secret and key, so relative paths resolve.
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("pull-secret.json", "id_rsa.pub"):
            (Path(tmp) / name).write_bytes((INVENTORIES / name).read_bytes())
        yield Path(tmp)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=mutated())
def test_a_mutated_inventory_is_valid_or_an_inventory_error(workdir: Path, doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    path = workdir / "inventory.yaml"
    try:
        inv = parse_inventory(text, path)
    except InventoryError as exc:
        assert exc.exit_code == 2
        assert exc.problems and all(p.startswith(str(path)) for p in exc.problems), exc.problems
    else:
        render_inventory(inv)  # a valid inventory must also render
    path.write_text(text)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
