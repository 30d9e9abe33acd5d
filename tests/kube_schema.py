"""Validate Kubernetes objects against the real CRD schemas in ../shared/data/gpu/.

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
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent
GPU_DATA = ROOT.parent / "shared" / "data" / "gpu"

CRD_FILES = (
    "nvidia.com_clusterpolicies.yaml",
    "nfd.openshift.io_nodefeaturediscoveries.yaml",
    "operators.coreos.com_subscriptions.yaml",
    "operators.coreos.com_operatorgroups.yaml",
    "operators.coreos.com_installplans.yaml",
)
CSV_FILES = {
    "nfd": "nfd.clusterserviceversion.yaml",
    "gpu-operator-certified": "gpu-operator-certified.clusterserviceversion.yaml",
}


def load_yaml(name: str) -> Any:
    return yaml.safe_load((GPU_DATA / name).read_text(encoding="utf-8"))


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
    for name in CRD_FILES:
        crd = load_yaml(name)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                found[(f"{group}/{version['name']}", kind)] = _structural(
                    version["schema"]["openAPIV3Schema"])
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
    """The real ClusterServiceVersion of a package (nfd, gpu-operator-certified)."""
    return load_yaml(CSV_FILES[package])  # type: ignore[no-any-return]
