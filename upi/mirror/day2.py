"""GPU day 2 on a disconnected cluster: oc-mirror's cluster resources, then the mirror pre-flight.

Before `upi gpu` installs anything on a cluster whose inventory has `mirror:`:
1. the objects oc-mirror v2 wrote into `working-dir/cluster-resources/`
   (`mirror.cluster_resources`) are read, each validated, and applied
   (server-side apply): ImageDigestMirrorSet and ImageTagMirrorSet
   (config.openshift.io/v1) and the CatalogSources (operators.coreos.com/
   v1alpha1). oc-mirror's docs/features/cluster-resources.md lists the files;
   the other kinds it writes there (ClusterCatalog for OLM v1, UpdateService,
   signature ConfigMaps) are not upi's to apply and are named as skipped;
2. OperatorHub `cluster` gets `spec.disableAllDefaultSources: true` (the
   default catalogs cannot be pulled in a disconnected site; OpenShift docs,
   "Disabling the default OperatorHub catalog sources");
3. upi waits for the mirrored CatalogSources upi installs from to be READY;
4. `upi check mirror`'s installed-cluster part runs: an image the GPU stack
   will pull that the mirror lacks stops the run before anything is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from upi.errors import InventoryError, Problem, UpiError
from upi.gpu.kube import Kube
from upi.gpu.steps import Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.gpu import settings
from upi.inventory.installer_rules import repository_problem
from upi.inventory.model import Inventory
from upi.inventory.yamlbounds import check_depth, check_graph, needs_graph_check
from upi.mirror.refs import parse_image
from upi.safefs import UnreadableFile, read_named_text, shown

Obj = dict[str, Any]
CONFIG = "config.openshift.io/v1"
OLM = "operators.coreos.com/v1alpha1"
# kind -> (apiVersion, the spec list holding the mappings, or None)
APPLIED = {
    "ImageDigestMirrorSet": (CONFIG, "imageDigestMirrors"),
    "ImageTagMirrorSet": (CONFIG, "imageTagMirrors"),
    "CatalogSource": (OLM, None),
}
MAX_FILE = 1 << 20


@dataclass
class Resources:
    """What the directory holds: objects to apply (in file order), and what upi leaves alone."""

    objects: list[Obj] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load_resources(inv: Inventory, directory: Path) -> Resources:
    """Every IDMS, ITMS and CatalogSource of the directory, validated (InventoryError names file, field)."""
    assert inv.mirror is not None  # noqa: S101 - called only with a mirror: section
    out = Resources()
    problems: list[Problem] = []
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    except OSError as exc:
        raise InventoryError([Problem(str(directory), None, "", f"cannot list it: {exc.strerror or exc}")]) \
            from None
    for path in files:
        try:
            docs = _documents(path)
        except InventoryError as exc:  # nested too deep, aliases: located already
            problems += exc.located
            continue
        except UpiError as exc:  # unreadable, too large, not UTF-8: the message names the path
            problems.append(Problem(str(path), None, "", str(exc).removeprefix(f"{shown(path)} ")))
            continue
        except yaml.YAMLError as exc:
            problems.append(Problem(str(path), None, "", f"not YAML: {str(exc)[:200]}"))
            continue
        for line, doc in docs:
            if doc is None:
                continue
            kind = doc.get("kind") if isinstance(doc, dict) else None
            if not isinstance(kind, str) or kind not in APPLIED:
                meta = doc.get("metadata") if isinstance(doc, dict) else None
                name = meta.get("name", "?") if isinstance(meta, dict) else "?"
                out.skipped.append(f"{path.name}: {kind if isinstance(kind, str) else 'not an object'} "
                                   f"{str(name)[:80]}")
                continue
            found = list(_problems(inv, doc))
            problems += [Problem(str(path), line, where, why) for where, why in found]
            if not found:
                out.objects.append(doc)
    if problems:
        raise InventoryError(problems)
    return out


def _documents(path: Path) -> list[tuple[int, Any]]:
    """(first line, value) of each YAML document; bounded as the inventory is (no alias bombs)."""
    text = read_named_text(path, MAX_FILE)
    check_depth(text, str(path))
    out = []
    for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if needs_graph_check(text):
            check_graph(node, str(path))
        out.append((node.start_mark.line + 1, yaml.safe_load(yaml.serialize(node))))
    return out


def _problems(inv: Inventory, doc: Obj) -> list[tuple[str, str]]:
    assert inv.mirror is not None  # noqa: S101 - load_resources checked
    registry = inv.mirror.registry
    kind = doc["kind"]
    api_version, mappings = APPLIED[kind]
    out = []
    if doc.get("apiVersion") != api_version:
        out.append(("apiVersion", f"{str(doc.get('apiVersion'))[:60]!r}: {kind} is {api_version}"))
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        out.append(("metadata.name", "missing"))
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return [*out, ("spec", "missing")]
    if mappings is None:
        return out + _catalog_problems(inv, doc, spec, registry)
    return out + _mapping_problems(spec, mappings, registry)


def _mapping_problems(spec: Obj, mappings: str, registry: str) -> list[tuple[str, str]]:
    """An IDMS's or ITMS's {source, mirrors} list: repositories, every mirror on the registry."""
    out: list[tuple[str, str]] = []
    entries = spec.get(mappings)
    if not isinstance(entries, list) or not entries:
        return [(f"spec.{mappings}", "no mappings")]
    for i, entry in enumerate(entries):
        where = f"spec.{mappings}[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            out.append((where, "not a {source, mirrors} mapping"))
            continue
        problem = repository_problem(entry["source"])
        if problem:
            out.append((f"{where}.source", f"{entry['source'][:80]!r} {problem}"))
        mirrors = entry.get("mirrors")
        if not isinstance(mirrors, list) or not mirrors:
            out.append((f"{where}.mirrors", "not a list of repositories"))
            continue
        for j, mirror in enumerate(mirrors):
            text = str(mirror)
            problem = repository_problem(text)
            if problem:
                out.append((f"{where}.mirrors[{j}]", f"{text[:80]!r} {problem}"))
            elif text != registry and not text.startswith(f"{registry}/"):
                out.append((f"{where}.mirrors[{j}]", f"{text[:80]!r} is not on mirror.registry {registry}"))
    return out


def _catalog_problems(inv: Inventory, doc: Obj, spec: Obj, registry: str) -> list[tuple[str, str]]:
    out = []
    namespace = settings(inv).catalog_sources.namespace
    meta = doc.get("metadata")
    if isinstance(meta, dict) and meta.get("namespace", namespace) != namespace:
        out.append(("metadata.namespace", f"not {namespace} (gpu.catalog_sources.namespace)"))
    if spec.get("sourceType") != "grpc":
        out.append(("spec.sourceType", f"{spec.get('sourceType')!r}: a mirrored index is served as grpc"))
    image = spec.get("image")
    try:
        ref = parse_image(str(image))
    except ValueError as exc:
        return [*out, ("spec.image", f"{str(image)[:80]!r} is not an image reference: {exc}")]
    if ref.registry != registry:
        out.append(("spec.image", f"{image} is not on mirror.registry {registry}"))
    return out


def apply_resources(inv: Inventory, kube: Kube, reporter: Reporter, *, dry_run: bool) -> None:
    """Steps 1 and 2: oc-mirror's objects (when named), then the default sources off."""
    assert inv.mirror is not None  # noqa: S101 - prepare checked
    if inv.mirror.cluster_resources:
        resources = load_resources(inv, inv.resolve(inv.mirror.cluster_resources))
        for obj in resources.objects:
            what = f"{obj['kind']} {obj['metadata']['name']}"
            if dry_run:
                reporter.note(f"would apply {what} (oc-mirror's cluster resources)")
                continue
            obj = {**obj, "metadata": {**obj["metadata"]}}
            if obj["kind"] == "CatalogSource":
                obj["metadata"].setdefault("namespace", settings(inv).catalog_sources.namespace)
            applied = kube.apply(obj)
            action = "created" if applied.created else "configured" if applied.changed else "unchanged"
            reporter.note(f"{what}: {action}")
        for name in resources.skipped:
            reporter.note(f"skipped {name}: not one upi applies")
    hub = kube.get(CONFIG, "OperatorHub", "cluster")
    if ((hub or {}).get("spec") or {}).get("disableAllDefaultSources") is True:
        reporter.note("OperatorHub cluster: default sources already disabled")
    elif dry_run:
        reporter.note("would set OperatorHub cluster spec.disableAllDefaultSources: true")
    else:
        kube.merge_patch(CONFIG, "OperatorHub", "cluster", None, {"spec": {"disableAllDefaultSources": True}})
        reporter.note("OperatorHub cluster: default sources disabled (disconnected)")


def wait_catalogs(inv: Inventory, kube: Kube, clock: Clock) -> None:
    """Step 3: the CatalogSources upi installs from are READY (a fresh one takes a while)."""
    src = settings(inv).catalog_sources

    def ready() -> bool | None:
        for name in (src.nfd, src.gpu_operator):
            obj = kube.get(OLM, "CatalogSource", name, src.namespace) or {}
            if ((obj.get("status") or {}).get("connectionState") or {}).get("lastObservedState") != "READY":
                return None
        return True

    clock.wait_for(ready, lambda: Diagnosis(
        "mirror", f"CatalogSources {src.nfd}, {src.gpu_operator}", "not READY before the deadline",
        fix="check the catalog pods in openshift-marketplace can pull the mirrored index images"))


def mirror_preflight(inv: Inventory, kube: Kube, reporter: Reporter, *, dry_run: bool = False,
                     timeout: float = 10.0) -> None:
    """Step 4: every image GPU day 2 will pull is in the mirror, or GpuFailed naming the first that is not.

    With --dry-run nothing was applied (the catalogs may not serve yet): problems are warnings.
    """
    from upi.check.mirror import check_mirror

    try:
        rows = check_mirror(inv, timeout=timeout, kube=kube)
    except (OSError, UnreadableFile) as exc:  # upi gpu runs without the pull secret or bundle at hand
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reporter.warn(f"mirror pre-flight skipped: {why} (upi check mirror --dir ASSETS runs it "
                      "where the pull secret and trust bundle are)")
        return
    bad = [r for r in rows if r.verdict == "fail"]
    for row in rows:
        (reporter.warn if row.verdict == "fail" else reporter.note)(f"mirror: {row.check} -> {row.got}")
    if bad and not dry_run:
        first = bad[0]
        raise GpuFailed(Diagnosis("mirror", first.check, f"{first.got} at {first.expected}"
                                  + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""), fix=first.fix))


def prepare(inv: Inventory, kube: Kube, clock: Clock, reporter: Reporter, *, dry_run: bool) -> None:
    """Everything a disconnected cluster needs before `upi gpu` installs (nothing without mirror:)."""
    if inv.mirror is None:
        return
    reporter.stage("mirror", "started")
    apply_resources(inv, kube, reporter, dry_run=dry_run)
    if not dry_run:
        wait_catalogs(inv, kube, clock)
    mirror_preflight(inv, kube, reporter, dry_run=dry_run)
    reporter.stage("mirror", "done")
