"""`upi check mirror`: the mirror registry holds every image upi's install pulls (docs/disconnected.md).

Before install that is the release image and the images upi names itself
(upi.mirror.imageset: the same lists the ImageSetConfiguration gives
oc-mirror). Each is looked up where the cluster will look for it: through
`cluster.mirrors`, as imageDigestSources maps it (upi.mirror.refs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from upi.check.report import CheckResult, Report
from upi.errors import InventoryError, Problem
from upi.inventory.model import Inventory
from upi.mirror.auth import credentials_for
from upi.mirror.imageset import Needed, additional_images, release_image
from upi.mirror.refs import ImageRef, Mapping, mirrored, parse_image
from upi.mirror.registry import Probe, Registry, trust
from upi.safefs import read_named_text

if TYPE_CHECKING:
    from upi.gpu.kube import Kube

AREA = "mirror"


def needed_images(inv: Inventory) -> list[Needed]:
    """What the install pulls that is known before install: the release, then upi's own images."""
    return [Needed(release_image(inv), "OpenShift release image"), *additional_images(inv)]


class _Registries:
    """One client per (registry, credentials), each pinged once before its first probe."""

    def __init__(self, inv: Inventory, timeout: float) -> None:
        c = inv.cluster
        self._secret = read_named_text(inv.resolve(c.pull_secret_file))
        bundle = inv.resolve(c.additional_trust_bundle_file) if c.additional_trust_bundle_file else None
        self._ctx = trust(bundle)
        self._timeout = timeout
        self._clients: dict[tuple[str, tuple[str, str] | None], tuple[Registry, str | None]] = {}

    def probe(self, ref: ImageRef) -> Probe:
        creds = credentials_for(self._secret, ref.registry, ref.repository)
        key = (ref.registry, creds)
        if key not in self._clients:
            client = Registry(ref.registry, creds, self._ctx, self._timeout)
            self._clients[key] = (client, client.ping())
        client, down = self._clients[key]
        if down is not None:
            return Probe("unreachable", down)
        return client.head_manifest(ref.repository, ref.reference)


_FIX = {
    "missing": "mirror it: run oc mirror with mirror/imageset-config.yaml (upi render) again, "
               "or check that cluster.mirrors matches oc-mirror's idms-oc-mirror.yaml",
    "unauthorised": "give the pull secret credentials that may pull from {registry} "
                    "(an \"auths\" entry for it)",
    "unreachable": "make {registry} reachable from here, serving the registry v2 API over TLS "
                   "with a certificate the trust bundle verifies",
}


def _row(needed: Needed, source: ImageRef, targets: list[ImageRef], registries: _Registries) -> CheckResult:
    if not targets:
        return CheckResult(AREA, str(source), "no cluster.mirrors entry covers it", "missing", "fail",
                           f"{needed.why}: add a cluster.mirrors entry whose source is {source.name} or a "
                           "prefix of it (oc-mirror's idms-oc-mirror.yaml lists them)")
    probes = []
    for target in targets:
        probe = registries.probe(target)
        if probe.verdict == "found":
            return CheckResult(AREA, str(source), str(target), f"found ({probe.detail})", "pass")
        probes.append((target, probe))
    target, probe = probes[0]
    fix = _FIX[probe.verdict].format(registry=target.registry, detail=probe.detail)
    return CheckResult(AREA, str(source), str(target), f"{probe.verdict} ({probe.detail})", "fail",
                       f"{needed.why} {source} is {probe.verdict} at {target}: {fix}")


def check_mirror(inv: Inventory, *, timeout: float = 10.0, kube: Kube | None = None) -> list[CheckResult]:
    """One row per image the install pulls: found, missing, unauthorised or unreachable.

    With `kube` (an installed cluster) also the operators' relatedImages at the
    channels upi subscribes to and the release's driver-toolkit image.
    """
    if inv.mirror is None:
        raise InventoryError([Problem(str(inv.source), None, "mirror",
                                      "the inventory has no mirror: section; docs/disconnected.md says "
                                      "what to write")])
    mapping = [Mapping(m.source, list(m.mirrors)) for m in inv.cluster.mirrors]
    registries = _Registries(inv, timeout)
    needed = needed_images(inv)
    rows = []
    if kube is not None:
        from upi.mirror.cluster import cluster_images

        more, unknown = cluster_images(inv, kube)
        needed += [n for n in more if n.image not in {m.image for m in needed}]
        rows += [CheckResult(AREA, u.what, "a list of images", f"unknown: {u.why}", "fail", u.fix)
                 for u in unknown]
    for item in needed:
        try:
            source = parse_image(item.image)
        except ValueError as exc:  # a catalog's relatedImages entry: not the inventory's
            rows.append(CheckResult(AREA, item.image[:120], "an image reference", f"unknown: {exc}",
                                    "fail", f"{item.why}: not an image reference"))
            continue
        row = _row(item, source, mirrored(source, mapping), registries)
        rows.append(_by_tag(inv, item, source, row))
    return rows


def _by_tag(inv: Inventory, needed: Needed, source: ImageRef, row: CheckResult) -> CheckResult:
    """A found image the cluster pulls by tag: imageDigestSources do not redirect tag pulls.

    Only an ImageTagMirrorSet does (OpenShift docs, "Configuring image registry
    repository mirroring"); oc-mirror writes one, which upi gpu applies when
    mirror.cluster_resources names its directory. The release is pulled by
    digest (the installer pins it), so its tag is only how it is looked up here.
    """
    assert inv.mirror is not None  # noqa: S101 - check_mirror checked
    if row.verdict != "pass" or source.digest or needed.image == release_image(inv) \
            or inv.mirror.cluster_resources:
        return row
    return CheckResult(row.area, row.check, row.expected, row.got, "warn",
                       f"{needed.why} is pulled by tag, which the cluster redirects to the mirror only "
                       "through an ImageTagMirrorSet: set mirror.cluster_resources (upi gpu applies "
                       "oc-mirror's itms-oc-mirror.yaml) or oc apply it yourself")


def run_check_mirror(inventory: Path, *, timeout: float, kubeconfig: Path | None = None,
                     assets: Path | None = None) -> Report:
    """Load the inventory (its pull secret and trust bundle are read) and check the mirror.

    With `kubeconfig` or `assets` the installed cluster is read too.
    """
    from upi.inventory import load_inventory

    inv = load_inventory(inventory)
    report = Report()
    if kubeconfig is None and assets is None:
        report.extend(check_mirror(inv, timeout=timeout))
        return report
    from upi.csr.connect import connect, find_kubeconfig
    from upi.gpu.kube import Kube

    conn = connect(find_kubeconfig(kubeconfig, assets))
    try:
        report.extend(check_mirror(inv, timeout=timeout, kube=Kube(conn)))
    finally:
        conn.close()
    return report
