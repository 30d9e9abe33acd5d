"""Which node CSRs to approve: a pure decision, rule by rule (reference csr.md).

Every check is an exact comparison against the inventory's identities; nothing
is prefix- or substring-matched. A CSR that fails a check is skipped with the
reason, never denied: another approver may own it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cryptography import x509
from cryptography.x509.oid import NameOID

from upi.facts.identity import NodeIdentity

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
BOOTSTRAPPER = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
AUTHENTICATED = "system:authenticated"
MCO_SA_GROUP = "system:serviceaccounts:openshift-machine-config-operator"

# Older clusters do not add system:serviceaccounts to the bootstrapper's groups.
CLIENT_GROUPS = (
    frozenset({MCO_SA_GROUP, "system:serviceaccounts", AUTHENTICATED}),
    frozenset({MCO_SA_GROUP, AUTHENTICATED}),
)
SERVING_GROUPS = frozenset({NODES_GROUP, AUTHENTICATED})
# Kubelets before 1.27 ask for key encipherment whatever the key type; the
# upstream validators accept both sets for either key, and so does upi.
CLIENT_USAGES = (
    frozenset({"digital signature", "client auth"}),
    frozenset({"digital signature", "key encipherment", "client auth"}),
)
SERVING_USAGES = (
    frozenset({"digital signature", "server auth"}),
    frozenset({"digital signature", "key encipherment", "server auth"}),
)
# How many pending CSRs beyond the inventory's nodes still look like retries
# (cluster-machine-approver's margin).
PENDING_MARGIN = 100

Kind = Literal["client", "serving"]


@dataclass(frozen=True)
class Csr:
    """What the API says about one CertificateSigningRequest (spec and state)."""

    name: str
    signer: str
    username: str
    groups: tuple[str, ...]
    usages: tuple[str, ...]
    request: bytes
    pending: bool = True


@dataclass(frozen=True)
class ClusterState:
    """What else the decision depends on.

    `nodes`: Nodes that exist; `pending`: CSRs pending now; `clients`: for each
    inventory node (by its short name), the approved client CSR the API already
    holds; `released`: CSR names an admin released from the one-client-CSR hold.
    """

    nodes: frozenset[str]
    pending: int
    clients: Mapping[str, str] = field(default_factory=dict)
    released: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Approve:
    """Approve this CSR: it is the `kind` CSR of inventory node `node`."""

    kind: Kind
    node: str


@dataclass(frozen=True)
class Skip:
    """Leave this CSR alone, for `reason`."""

    reason: str
    kind: Kind | None = None
    node: str | None = None


@dataclass(frozen=True)
class Hold:
    """Neither approve nor deny: a second client CSR for a node that has not joined yet.

    The node already holds a client certificate from `prior`; until its Node
    registers, another one is a possible replay of the bootstrap credential.
    An admin releases it by name (docs/approve-csr.md).
    """

    reason: str
    kind: Kind
    node: str
    prior: str


Decision = Approve | Skip | Hold


class _Refused(Exception):
    """A failed check; carries the reason for Skip."""


def kind_of(csr: Csr) -> Kind | None:
    """`client` or `serving` by signer; None for a signer upi never approves."""
    if csr.signer == CLIENT_SIGNER:
        return "client"
    if csr.signer == SERVING_SIGNER:
        return "serving"
    return None


def pending_cap(identities: Mapping[str, NodeIdentity]) -> int:
    """The most pending CSRs the inventory can explain: its nodes plus a margin."""
    return len(set(identities.values())) + PENDING_MARGIN


def decide(csr: Csr, identities: Mapping[str, NodeIdentity], state: ClusterState) -> Decision:
    """Approve `csr` only if it passes every rule of csr.md for an inventory node."""
    kind = kind_of(csr)
    if not csr.pending:
        return Skip("already approved or denied", kind)
    if kind is None:
        return Skip(f"signer {csr.signer!r} is not a kubelet signer")
    cap = pending_cap(identities)
    if state.pending > cap:
        return Skip(f"{state.pending} CSRs pending, more than the inventory explains ({cap}): "
                    "approving nothing", kind)
    node = None
    try:
        req = _parse(csr.request)
        node = _node_name(req)
        ident = identities.get(node)
        if ident is None:
            raise _Refused(f"node {node!r} is not in the inventory")
        if kind == "client":
            _check_client(csr, req, ident, state)
        else:
            _check_serving(csr, req, node, ident)
    except _Refused as exc:
        return Skip(str(exc), kind, node)
    prior = state.clients.get(ident.name) if kind == "client" else None
    if prior is not None and prior != csr.name and csr.name not in state.released:
        return Hold(f"{ident.name} already has an approved client CSR ({prior}) and its Node "
                    "has not registered; a second one is a possible replay of the bootstrap "
                    f"credential (an attack). Check it, then release it with `upi approve-csr "
                    f"INVENTORY --release {csr.name}`", kind, node, prior)
    return Approve(kind, node)


def client_node(csr: Csr, identities: Mapping[str, NodeIdentity]) -> str | None:
    """The inventory node (short name) an approved client CSR gave a certificate to, if any.

    Only the signer and the subject's CN matter: whoever approved it, that
    node holds a client certificate now.
    """
    if kind_of(csr) != "client":
        return None
    try:
        req = x509.load_pem_x509_csr(csr.request)
        cns = [a.value for a in req.subject if a.oid == NameOID.COMMON_NAME]
    except (ValueError, TypeError):
        return None
    if len(cns) != 1 or not isinstance(cns[0], str) or not cns[0].startswith(NODE_PREFIX):
        return None
    ident = identities.get(cns[0][len(NODE_PREFIX):])
    return ident.name if ident is not None else None


def _parse(pem: bytes) -> x509.CertificateSigningRequest:
    if pem.count(b"-----BEGIN CERTIFICATE REQUEST-----") != 1:
        raise _Refused("spec.request is not one PEM certificate request")
    try:
        req = x509.load_pem_x509_csr(pem)
        valid = req.is_signature_valid
    except (ValueError, TypeError, x509.UnsupportedGeneralNameType) as exc:
        raise _Refused(f"spec.request does not parse: {exc}") from None
    if not valid:
        raise _Refused("spec.request has a bad signature")
    return req


def _node_name(req: x509.CertificateSigningRequest) -> str:
    """The node named by the subject, which must be exactly O=system:nodes, CN=system:node:<name>."""
    attrs = list(req.subject)
    orgs = [a.value for a in attrs if a.oid == NameOID.ORGANIZATION_NAME]
    cns = [a.value for a in attrs if a.oid == NameOID.COMMON_NAME]
    if orgs != [NODES_GROUP]:
        raise _Refused(f"subject O is {orgs!r}, not exactly ['system:nodes']")
    if len(cns) != 1 or not isinstance(cns[0], str) or not cns[0].startswith(NODE_PREFIX):
        raise _Refused(f"subject CN is {cns!r}, not one 'system:node:<name>'")
    if len(attrs) != 2:
        raise _Refused(f"subject {req.subject.rfc4514_string()!r} has attributes besides O and CN")
    return cns[0][len(NODE_PREFIX):]


def _sans(req: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _check_usages(csr: Csr, allowed: tuple[frozenset[str], ...]) -> None:
    if len(set(csr.usages)) != len(csr.usages) or frozenset(csr.usages) not in allowed:
        want = " or ".join(repr(sorted(s)) for s in allowed)
        raise _Refused(f"usages {sorted(csr.usages)!r} are not exactly {want}")


def _check_client(csr: Csr, req: x509.CertificateSigningRequest, ident: NodeIdentity,
                  state: ClusterState) -> None:
    if csr.username != BOOTSTRAPPER:
        raise _Refused(f"client CSR requested by {csr.username!r}, not the node-bootstrapper")
    if frozenset(csr.groups) not in CLIENT_GROUPS or len(set(csr.groups)) != len(csr.groups):
        raise _Refused(f"client CSR groups {sorted(csr.groups)!r} are not the node-bootstrapper's")
    _check_usages(csr, CLIENT_USAGES)
    if _sans(req) is not None:
        raise _Refused("client CSR carries subject alternative names")
    live = sorted(ident.node_names & state.nodes)
    if live:
        raise _Refused(f"Node {live[0]!r} already exists: a client CSR for it is a replay or an attack")


def _check_serving(csr: Csr, req: x509.CertificateSigningRequest, node: str,
                   ident: NodeIdentity) -> None:
    if csr.username != NODE_PREFIX + node:
        raise _Refused(f"serving CSR for {NODE_PREFIX + node!r} requested by {csr.username!r}")
    if frozenset(csr.groups) != SERVING_GROUPS or len(set(csr.groups)) != len(csr.groups):
        raise _Refused(f"serving CSR groups {sorted(csr.groups)!r} are not "
                       f"{sorted(SERVING_GROUPS)!r}")
    _check_usages(csr, SERVING_USAGES)
    sans = _sans(req)
    if sans is None:
        raise _Refused("serving CSR has no subject alternative names")
    _check_serving_sans(sans, ident)


def _check_serving_sans(sans: x509.SubjectAlternativeName, ident: NodeIdentity) -> None:
    names = {_dns_key(n) for n in ident.node_names}
    want_ip = ipaddress.ip_address(ident.ip)
    ips = 0
    for gn in sans:
        if isinstance(gn, x509.DNSName):
            if _dns_key(gn.value) not in names:
                raise _Refused(f"DNS SAN {gn.value!r} is not {ident.name!r} or {ident.fqdn!r}")
        elif isinstance(gn, x509.IPAddress):
            if gn.value != want_ip:
                raise _Refused(f"IP SAN {gn.value} is not {ident.name}'s inventory IP {ident.ip}")
            ips += 1
        else:
            raise _Refused(f"serving CSR carries a {type(gn).__name__} SAN")
    if ips == 0:
        raise _Refused("serving CSR has no IP SAN")


def _dns_key(name: str) -> str:
    """Compare DNS names case-insensitively, ignoring one trailing dot."""
    return name.lower().removesuffix(".")
