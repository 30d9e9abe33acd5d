"""install-config.yaml for platform none, in the form the cluster's version takes."""

from __future__ import annotations

import json
from typing import Any

from upi.inventory.model import Inventory
from upi.safefs import read_named_text


def install_config(inv: Inventory) -> dict[str, Any]:
    """The install-config document (it holds the pull secret: write it 0600)."""
    c, n = inv.cluster, inv.network
    networking: dict[str, Any] = {
        "clusterNetwork": [{"cidr": str(n.cluster_network), "hostPrefix": n.host_prefix}],
        "networkType": inv.network_type.value,
        "serviceNetwork": [str(n.service_network)],
    }
    if c.version >= (4, 2):
        networking["machineNetwork"] = [{"cidr": str(n.machine_cidr)},
                                        *({"cidr": str(m.cidr)} for m in n.machine_networks)]
    else:
        networking["machineCIDR"] = str(n.machine_cidr)
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "baseDomain": c.base_domain,
        "metadata": {"name": c.name},
        "compute": [{"hyperthreading": "Enabled", "name": "worker", "replicas": 0}],
        "controlPlane": {"hyperthreading": "Enabled", "name": "master",
                         "replicas": len(inv.masters)},
        "networking": networking,
        "platform": {"none": {}},
    }
    if c.fips:
        doc["fips"] = True
    if c.proxy:
        proxy = {"httpProxy": c.proxy.http_proxy, "httpsProxy": c.proxy.https_proxy,
                 "noProxy": ",".join(c.proxy.no_proxy) or None}
        doc["proxy"] = {k: v for k, v in proxy.items() if v}
    if c.additional_trust_bundle_file:
        doc["additionalTrustBundle"] = read_named_text(inv.resolve(c.additional_trust_bundle_file))
        if not c.proxy and c.version >= (4, 12):
            # The default policy, Proxyonly, trusts the bundle only through a proxy: without
            # one, a mirror registry's CA would not be trusted cluster-wide after bootstrap.
            doc["additionalTrustBundlePolicy"] = "Always"
    if c.mirrors:
        key = "imageDigestSources" if c.version >= (4, 14) else "imageContentSources"
        doc[key] = [{"source": m.source, "mirrors": list(m.mirrors)} for m in c.mirrors]
    # One line, as the docs show it; rules._pull_secret proved it is JSON.
    secret = json.loads(read_named_text(inv.resolve(c.pull_secret_file)))
    doc["pullSecret"] = json.dumps(secret, separators=(",", ":"))
    doc["sshKey"] = read_named_text(inv.resolve(c.ssh_key_file)).strip()
    return doc
