"""`upi schema` checked by a real JSON Schema validator (jsonschema), as an editor would use it.

Every example inventory passes; of the broken-inventory corpus, exactly the
cases a schema can see (types, patterns, enums, bounds, unknown or missing
keys) fail. The rest (duplicates, overlaps, rules across fields or
versions, files on disk) are left to `upi validate`; the list below says
which is which, so a new case must be sorted into one or the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import INVENTORIES
from test_broken_inventories import CASES, _broken

from upi.cli import app
from upi.inventory.schema import undescribed

STRUCTURAL = {
    "unknown-key", "missing-key", "float-version", "not-openshift-4", "cluster-name-uppercase",
    "bad-base-domain", "bad-mac", "multicast-mac", "bad-node-name", "bad-ip", "bad-role", "bad-machine",
    "bad-firmware", "bad-cidr", "bad-http-url", "relative-tftp-root", "vm-too-small",
    "kernel-arg-with-space", "hypervisor-uri-without-scheme", "cluster-name-over-54",
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    return jsonschema.Draft202012Validator(schema, format_checker=checker)


def _errors(validator: jsonschema.Draft202012Validator, text: str) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(yaml.safe_load(text))]


@pytest.mark.parametrize("path", sorted(INVENTORIES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_inventory_passes_the_schema(validator, path: Path) -> None:
    assert _errors(validator, path.read_text()) == []


def test_the_schema_sees_exactly_the_structural_breakages(validator, tmp_path: Path) -> None:
    failing = set()
    for case in CASES:
        text = _broken(tmp_path, case).read_text()
        try:
            yaml.safe_load(text)
        except yaml.YAMLError:
            continue  # not YAML at all: no schema can say anything
        if _errors(validator, text):
            failing.add(case.id)
    assert failing == STRUCTURAL, (f"the schema misses {sorted(STRUCTURAL - failing)}, "
                                   f"and refuses {sorted(failing - STRUCTURAL)}")


def test_every_key_has_a_description(schema: dict[str, Any]) -> None:
    assert undescribed(schema) == []
    assert schema["$defs"]["Node"]["description"].startswith("One cluster machine")


def test_every_optional_key_shows_its_default(schema: dict[str, Any]) -> None:
    objects = [("Inventory", schema), *schema["$defs"].items()]
    missing = [f"{name}.{key}" for name, obj in objects for key, prop in obj.get("properties", {}).items()
               if key not in obj.get("required", []) and "default" not in prop]
    assert missing == []
    assert schema["$defs"]["Node"]["properties"]["kernel_args"]["default"] == []


def test_enums_defaults_and_patterns_reach_the_editor(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    assert defs["Role"]["enum"] == ["bootstrap", "master", "worker"]
    assert defs["Firmware"]["enum"] == ["bios", "uefi"]
    assert defs["Machine"]["enum"] == ["vm", "metal"]
    assert defs["Network"]["properties"]["cluster_network"]["default"] == "10.128.0.0/14"
    assert defs["Provisioner"]["properties"]["tftp_root"]["default"] == "/var/lib/tftpboot"
    assert defs["VmSize"]["properties"]["memory_mib"]["minimum"] == 1024
    node = defs["Node"]["properties"]
    for key in ("mac", "ip", "name"):
        assert node[key]["pattern"], key
    assert defs["Network"]["properties"]["machine_cidr"]["pattern"]


@pytest.mark.parametrize(("kind", "good", "bad"), [
    ("mac", ["52:54:00:21:03:50", "B8-CE-F6-10-33-44"],
     ["52:54:00:21:03", "01:00:5e:10:33:44", "zz:54:00:21:03:50"]),
    ("ip", ["10.33.3.18", "255.255.255.255"], ["10.33.3.318", "010.1.1.1", "10.33.3", "10.33.3.18/24"]),
    ("cidr", ["10.33.3.0/24", "10.0.0.0/8"], ["10.33.3.0/33", "10.33.3.0/", "10.33.3/24"]),
    ("label", ["master-0", "a"], ["Master-0", "-a", "a-", "a" * 64, "a.b"]),
])
def test_patterns_accept_and_refuse_like_the_validators(schema: dict[str, Any], kind, good, bad) -> None:
    props = {"mac": schema["$defs"]["Node"]["properties"]["mac"],
             "ip": schema["$defs"]["Node"]["properties"]["ip"],
             "cidr": schema["$defs"]["Network"]["properties"]["machine_cidr"],
             "label": schema["$defs"]["Node"]["properties"]["name"]}[kind]
    check = jsonschema.Draft202012Validator(props)
    assert [v for v in good if not check.is_valid(v)] == []
    assert [v for v in bad if check.is_valid(v)] == []
