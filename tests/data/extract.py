"""Extract the upstream facts the tests need into tests/data/, from the project's reference data.

Run from the repository root, beside which the reference data sits:

    python tests/data/extract.py            # write tests/data/{gpu,network,tuning}/*.json
    python tests/data/extract.py --check    # exit 1 when the committed files are stale
    python tests/data/extract.py --from DIR # read DIR/{gpu,network,tuning} instead

This is the only program that reads the reference data (`../shared/data/`
relative to the repository); the tests read only what it wrote, so they pass
from a clone alone (tests/test_data_local.py holds them to that).

What is kept is fact, not prose: each CRD's group, kind, plural, scope and per
version its served/storage flags, subresources and openAPIV3Schema with every
`description` removed; each CSV's name, version, replaces, skip range,
suggested namespace, alm-examples (parsed), owned CRDs, related images and
install modes; a bundle's package, channels and default channel. Every file
names its origin (upstream project, file, version) and licence.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data"
LICENCE = "Apache-2.0"

# (area, file in the reference data) -> (upstream project, upstream file, version), as the
# reference data's README.md in each area records them.
ORIGINS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("gpu", "nvidia.com_clusterpolicies.yaml"): (
        "NVIDIA/gpu-operator", "config/crd/bases/nvidia.com_clusterpolicies.yaml",
        "commit of 2026-08-21 (v26.7 development)"),
    ("gpu", "gpu-operator-certified.clusterserviceversion.yaml"): (
        "NVIDIA/gpu-operator", "bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml",
        "CSV 26.7.0"),
    ("gpu", "nfd.openshift.io_nodefeaturediscoveries.yaml"): (
        "openshift/cluster-nfd-operator", "config/crd/bases/nfd.openshift.io_nodefeaturediscoveries.yaml",
        "commit of 2026-08-19"),
    ("gpu", "nfd.clusterserviceversion.yaml"): (
        "openshift/cluster-nfd-operator", "manifests/stable/manifests/nfd.clusterserviceversion.yaml",
        "CSV 5.0.0"),
    ("gpu", "operators.coreos.com_subscriptions.yaml"): (
        "operator-framework/api", "crds/operators.coreos.com_subscriptions.yaml", "commit of 2026-08-03"),
    ("gpu", "operators.coreos.com_operatorgroups.yaml"): (
        "operator-framework/api", "crds/operators.coreos.com_operatorgroups.yaml", "commit of 2026-08-03"),
    ("gpu", "operators.coreos.com_installplans.yaml"): (
        "operator-framework/api", "crds/operators.coreos.com_installplans.yaml", "commit of 2026-08-03"),
    ("network", "nvidia-network-operator.clusterserviceversion.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/nvidia-network-operator.clusterserviceversion.yaml",
        "tag v26.4.1"),
    ("network", "mellanox.com_nicclusterpolicies.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/mellanox.com_nicclusterpolicies.yaml", "tag v26.4.1"),
    ("network", "mellanox.com_nicnodepolicies.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/mellanox.com_nicnodepolicies.yaml", "tag v26.4.1"),
    ("network", "mellanox.com_hostdevicenetworks.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/mellanox.com_hostdevicenetworks.yaml", "tag v26.4.1"),
    ("network", "mellanox.com_ipoibnetworks.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/mellanox.com_ipoibnetworks.yaml", "tag v26.4.1"),
    ("network", "mellanox.com_macvlannetworks.yaml"): (
        "Mellanox/network-operator", "bundle/manifests/mellanox.com_macvlannetworks.yaml", "tag v26.4.1"),
    ("network", "annotations.yaml"): (
        "Mellanox/network-operator", "bundle/metadata/annotations.yaml", "tag v26.4.1"),
    ("tuning", "machineconfiguration.openshift.io_machineconfigpools.yaml"): (
        "openshift/api", "machineconfiguration/v1/zz_generated.crd-manifests/ (MachineConfigPool CRD)",
        "commit of 2026-08-22"),
    ("tuning", "machineconfiguration.openshift.io_kubeletconfigs.yaml"): (
        "openshift/api", "machineconfiguration/v1/zz_generated.crd-manifests/ (KubeletConfig CRD, "
        "Default feature set)", "commit of 2026-08-22"),
    ("tuning", "machineconfiguration.openshift.io_machineconfigs.yaml"): (
        "openshift/api", "machineconfiguration/v1/zz_generated.crd-manifests/ (MachineConfig CRD)",
        "commit of 2026-08-22"),
    ("tuning", "performance.openshift.io_performanceprofiles.yaml"): (
        "openshift/cluster-node-tuning-operator", "manifests/20-performance-profile.crd.yaml",
        "commit of 2026-08-21"),
    ("tuning", "tuned.openshift.io_tuneds.yaml"): (
        "openshift/cluster-node-tuning-operator", "manifests/20-tuned.crd.yaml",
        "the same snapshot as 20-performance-profile.crd.yaml"),
}

# Keys of a schema node whose values are schemas (or maps / lists of them).
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "additionalItems")
_SCHEMA_LIST = ("anyOf", "allOf", "oneOf")


class ExtractError(Exception):
    """The reference data is not what this script knows how to read."""


def _origin(area: str, name: str) -> dict[str, str]:
    try:
        project, path, version = ORIGINS[(area, name)]
    except KeyError:
        raise ExtractError(f"{area}/{name}: no origin recorded in ORIGINS; add one") from None
    return {"project": project, "file": path, "version": version, "licence": LICENCE,
            "reference_copy": f"{area}/{name}"}


def facts_only(schema: Any) -> Any:
    """The schema without its prose: every `description` keyword goes, property names stay."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: facts_only(v) for k, v in value.items()}
        elif key in _SCHEMA_ONE:
            out[key] = facts_only(value)
        elif key in _SCHEMA_LIST and isinstance(value, list):
            out[key] = [facts_only(v) for v in value]
        else:
            out[key] = value
    return out


def crd_facts(area: str, name: str, doc: dict[str, Any]) -> dict[str, Any]:
    origin = _origin(area, name)
    spec = doc["spec"]
    versions = []
    for v in spec["versions"]:
        versions.append({
            "name": v["name"],
            "served": bool(v.get("served")),
            "storage": bool(v.get("storage")),
            "subresources": v.get("subresources") or {},
            "openAPIV3Schema": facts_only((v.get("schema") or {}).get("openAPIV3Schema") or {}),
        })
    return {"origin": origin, "kind": "CustomResourceDefinition", "name": doc["metadata"]["name"],
            "group": spec["group"], "names": {k: spec["names"][k] for k in ("kind", "plural", "singular",
                                                                          "listKind") if k in spec["names"]},
            "scope": spec["scope"], "versions": versions}


def csv_facts(area: str, name: str, doc: dict[str, Any]) -> dict[str, Any]:
    notes = doc["metadata"].get("annotations") or {}
    spec = doc["spec"]
    try:
        examples = json.loads(notes.get("alm-examples") or "[]")
    except json.JSONDecodeError as exc:
        raise ExtractError(f"{area}/{name}: alm-examples is not JSON ({exc})") from None
    return {
        "origin": _origin(area, name),
        "kind": "ClusterServiceVersion",
        "name": doc["metadata"]["name"],
        "version": spec.get("version"),
        "replaces": spec.get("replaces"),
        "skipRange": notes.get("olm.skipRange"),
        "suggestedNamespace": notes.get("operatorframework.io/suggested-namespace"),
        "almExamples": examples,
        "ownedCRDs": [{k: c[k] for k in ("name", "kind", "version") if k in c}
                      for c in (spec.get("customresourcedefinitions") or {}).get("owned") or []],
        "relatedImages": spec.get("relatedImages") or [],
        "installModes": spec.get("installModes") or [],
        "minKubeVersion": spec.get("minKubeVersion"),
    }


def bundle_facts(area: str, name: str, doc: dict[str, Any]) -> dict[str, Any]:
    notes = doc.get("annotations") or {}
    prefix = "operators.operatorframework.io.bundle."
    return {
        "origin": _origin(area, name),
        "kind": "BundleAnnotations",
        "package": notes.get(f"{prefix}package.v1"),
        "channels": [c for c in str(notes.get(f"{prefix}channels.v1") or "").split(",") if c],
        "defaultChannel": notes.get(f"{prefix}channel.default.v1"),
        "openshiftVersions": notes.get("com.redhat.openshift.versions"),
    }


def out_name(name: str, kind: str) -> str:
    stem = name.removesuffix(".yaml")
    if kind == "ClusterServiceVersion":
        return f"csv-{stem.removesuffix('.clusterserviceversion')}.json"
    if kind == "BundleAnnotations":
        return "bundle-annotations.json"
    return f"crd-{stem}.json"


def extract(source: Path) -> dict[str, str]:
    """Relative output path -> text, for every file under `source`'s areas."""
    out: dict[str, str] = {}
    for area in ("gpu", "network", "tuning"):
        folder = source / area
        if not folder.is_dir():
            raise ExtractError(f"{folder}: not a directory (use --from DIR)")
        for path in sorted(folder.glob("*.yaml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            kind = doc.get("kind") if isinstance(doc, dict) else None
            if kind == "CustomResourceDefinition":
                facts = crd_facts(area, path.name, doc)
            elif kind == "ClusterServiceVersion":
                facts = csv_facts(area, path.name, doc)
            elif isinstance(doc, dict) and "annotations" in doc:
                facts = bundle_facts(area, path.name, doc)
                kind = "BundleAnnotations"
            else:
                raise ExtractError(f"{path}: neither a CRD, a CSV nor bundle annotations")
            out[f"{area}/{out_name(path.name, str(kind))}"] = (
                json.dumps(facts, indent=1, ensure_ascii=False) + "\n")
    licence = source / "network" / "LICENSE"
    if licence.is_file():
        out["LICENSE"] = licence.read_text(encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=DEFAULT_SOURCE,
                        help="the reference data directory (default: ../shared/data beside the repository)")
    parser.add_argument("--check", action="store_true", help="compare, do not write; exit 1 when stale")
    args = parser.parse_args(argv)
    try:
        files = extract(args.source)
    except (ExtractError, OSError, yaml.YAMLError) as exc:
        print(f"extract: {exc}", file=sys.stderr)
        return 2
    stale = [rel for rel, text in files.items()
             if not (HERE / rel).is_file() or (HERE / rel).read_text(encoding="utf-8") != text]
    wanted = set(files)
    extra = [rel for rel in (str(p.relative_to(HERE)) for p in HERE.glob("*/*.json")) if rel not in wanted]
    if args.check:
        for rel in stale + extra:
            print(f"stale: tests/data/{rel}")
        return 1 if stale or extra else 0
    for rel in stale:
        (HERE / rel).parent.mkdir(parents=True, exist_ok=True)
        (HERE / rel).write_text(files[rel], encoding="utf-8")
        print(f"wrote tests/data/{rel}")
    for rel in extra:
        (HERE / rel).unlink()
        print(f"removed tests/data/{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
