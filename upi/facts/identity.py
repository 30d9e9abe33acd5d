"""Who each node is, as its certificate requests must prove (reference csr.md)."""

from __future__ import annotations

from dataclasses import dataclass

from upi.inventory.model import Inventory, Role


@dataclass(frozen=True)
class NodeIdentity:
    """The names and address a node's CSRs may carry."""

    name: str
    fqdn: str
    ip: str
    role: str

    @property
    def node_names(self) -> frozenset[str]:
        """Names the kubelet may register as: the short name (DHCP) or FQDN (PTR)."""
        return frozenset({self.name, self.fqdn})


def node_identities(inv: Inventory) -> dict[str, NodeIdentity]:
    """Every node a CSR may belong to, keyed by each name it may use.

    The bootstrap never joins the cluster as a node, so it is not here.
    """
    out: dict[str, NodeIdentity] = {}
    for node in inv.nodes:
        if node.role is Role.bootstrap:
            continue
        ident = NodeIdentity(node.name, f"{node.name}.{inv.cluster.domain}", str(node.ip),
                             node.role.value)
        for name in ident.node_names:
            out[name] = ident
    return out
