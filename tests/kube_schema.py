"""Validate Kubernetes objects against the real CRD schemas kept in tests/data/.

tests/data/ holds facts extracted from the upstream CRDs and CSVs by
tests/data/extract.py (origin and licence in tests/data/README.md): every
served version's `openAPIV3Schema` (descriptions dropped) and each CSV's
alm-examples. Nothing outside the repository is read.

A CRD's `openAPIV3Schema` is a structural schema: an API server rejects (or
prunes) fields it does not list, enforces types and enums, and understands
`nullable`, `x-kubernetes-int-or-string` and `x-kubernetes-preserve-unknown-fields`.
JSON Schema has none of those extensions, so each schema is translated once:
unknown fields become errors (a field upi sends that the server would drop is
a bug), `nullable` admits null, int-or-string admits both. The `jsonschema`
package then does the validation itself.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

DATA = Path(__file__).resolve().parent / "data"
AREAS = ("gpu", "network", "tuning")
OLM = "operators.coreos.com/v1alpha1"


def load_json(rel: str) -> Any:
    """One extracted file of tests/data/, e.g. `gpu/csv-nfd.json`."""
    return json.loads((DATA / rel).read_text(encoding="utf-8"))


def _structural(schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
                   "x-kubernetes-map-type", "format", "nullable", "x-kubernetes-int-or-string",
                   "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            continue
        if key == "properties":
            out[key] = {k: _structural(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _structural(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_structural(v) for v in value]
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    # An object schema without properties/additionalProperties keeps what it is given
    # (metadata, preserve-unknown-fields); one that lists properties allows only those.
    if "properties" in schema and "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@functools.cache
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for area in AREAS:
        for path in sorted((DATA / area).glob("crd-*.json")):
            crd = load_json(f"{area}/{path.name}")
            group, kind = crd["group"], crd["names"]["kind"]
            for version in crd["versions"]:
                if version["served"]:
                    found[(f"{group}/{version['name']}", kind)] = _structural(version["openAPIV3Schema"])
    return found


def has_schema(api_version: str, kind: str) -> bool:
    return (api_version, kind) in _schemas()


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Every way `obj` breaks its kind's CRD schema (empty when valid)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    schema = _schemas().get(key)
    if schema is None:
        return [f"no CRD schema for {key[0]} {key[1]}"]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in validator.iter_errors(obj)]


def csv(package: str) -> dict[str, Any]:
    """A ClusterServiceVersion of a package (nfd, gpu-operator-certified, nvidia-network-operator).

    Built from the facts extracted from the real CSV (tests/data/<area>/csv-<package>.json):
    its name, version, the alm-examples annotation as the real one carries it (a JSON
    string), the suggested namespace, owned CRDs, related images and install modes.
    """
    facts = next(load_json(f"{area}/{p.name}") for area in AREAS
                 for p in (DATA / area).glob(f"csv-{package}.json"))
    notes = {"alm-examples": json.dumps(facts["almExamples"], indent=2)}
    if facts.get("suggestedNamespace"):
        notes["operatorframework.io/suggested-namespace"] = facts["suggestedNamespace"]
    if facts.get("skipRange"):
        notes["olm.skipRange"] = facts["skipRange"]
    spec: dict[str, Any] = {
        "version": facts["version"],
        "customresourcedefinitions": {"owned": facts["ownedCRDs"]},
        "relatedImages": facts["relatedImages"],
        "installModes": facts["installModes"],
    }
    if facts.get("replaces"):
        spec["replaces"] = facts["replaces"]
    return {"apiVersion": OLM, "kind": "ClusterServiceVersion",
            "metadata": {"name": facts["name"], "annotations": notes}, "spec": spec}
