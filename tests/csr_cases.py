"""Legitimate and hostile node CSRs for the dgxpod inventory, as a kubelet (or attacker) sends them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from certs import make_csr
from cryptography import x509
from cryptography.x509.oid import NameOID

from upi.csr.decide import BOOTSTRAPPER, CLIENT_SIGNER, SERVING_SIGNER, Csr

DOMAIN = "dgxpod.nvidia.com"
MCO = "system:serviceaccounts:openshift-machine-config-operator"
CLIENT_GROUPS = [MCO, "system:serviceaccounts", "system:authenticated"]
SERVING_GROUPS = ["system:nodes", "system:authenticated"]
IPS = {"master-0": "10.33.3.50", "master-1": "10.33.3.51", "master-2": "10.33.3.52",
       "worker-0": "10.33.3.44", "worker-1": "10.33.3.46"}


@dataclass(frozen=True)
class Spec:
    """One CSR to create: the fields of spec, and the PEM."""

    name: str
    pem: bytes
    signer: str
    username: str
    groups: tuple[str, ...]
    usages: tuple[str, ...]

    def csr(self) -> Csr:
        return Csr(self.name, self.signer, self.username, self.groups, self.usages, self.pem)

    def kwargs(self) -> dict[str, object]:
        return {"signer": self.signer, "username": self.username, "groups": list(self.groups),
                "usages": list(self.usages)}


def client(node: str, name: str | None = None, *, key: str = "ec") -> Spec:
    usages = ("digital signature", "key encipherment", "client auth") if key == "rsa" else (
        "digital signature", "client auth")
    return Spec(name or f"client-{node}", make_csr(f"system:node:{node}", key=key), CLIENT_SIGNER,
                BOOTSTRAPPER, tuple(CLIENT_GROUPS), usages)


def serving(node: str, name: str | None = None, *, key: str = "ec", dns: tuple[str, ...] | None = None,
            ips: tuple[str, ...] | None = None) -> Spec:
    short = node.split(".")[0]
    dns = (short, f"{short}.{DOMAIN}") if dns is None else dns
    ips = (IPS[short],) if ips is None else ips
    usages = ("digital signature", "key encipherment", "server auth") if key == "rsa" else (
        "digital signature", "server auth")
    return Spec(name or f"serving-{node}", make_csr(f"system:node:{node}", dns=dns, ips=ips, key=key),
                SERVING_SIGNER, f"system:node:{node}", tuple(SERVING_GROUPS), usages)


def legitimate() -> list[Spec]:
    """Every inventory node's client and serving CSR; workers with RSA, masters ECDSA."""
    out = []
    for node in IPS:
        key = "rsa" if node.startswith("worker") else "ec"
        out += [client(node, key=key), serving(node, key=key)]
    return out


def hostile() -> dict[str, Spec]:
    """At least 15 kinds of CSR that must never be approved (worker-1's Node already exists)."""
    m0 = serving("master-0")
    ou = x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "x")
    cases = {
        "unknown-node": client("intruder"),
        "bootstrap-node": client("bootstrap"),
        "prefix-evil": client("master-0.evil"),
        "prefix-dash": client("master-00"),
        "cn-not-requestor": replace(serving("master-1"), username="system:node:master-0"),
        "serving-extra-san": serving("master-0", dns=("master-0", "api.dgxpod.nvidia.com")),
        "serving-prefix-san": serving("master-0", dns=("master-0.dgxpod.nvidia.com.evil.com",)),
        "serving-foreign-ip": serving("master-0", ips=("10.33.3.50", "10.9.9.9")),
        "serving-other-node-ip": serving("master-0", ips=("10.33.3.51",)),
        "serving-no-ip": serving("master-0", ips=()),
        "serving-email-san": replace(m0, pem=make_csr("system:node:master-0", dns=("master-0",),
                                                      ips=("10.33.3.50",), emails=("a@b.c",))),
        "serving-uri-san": replace(m0, pem=make_csr("system:node:master-0", ips=("10.33.3.50",),
                                                    uris=("spiffe://x/y",))),
        "other-signer": replace(client("master-0"), signer="kubernetes.io/kube-apiserver-client"),
        "legacy-unknown-signer": replace(client("master-0"), signer="example.com/anything"),
        "client-server-usage": replace(client("master-0"), usages=("digital signature", "server auth")),
        "client-extra-usage": replace(client("master-0"), usages=(
            "digital signature", "client auth", "server auth")),
        "serving-client-usage": replace(m0, usages=("digital signature", "client auth")),
        "wrong-org": replace(client("master-0"), pem=make_csr("system:node:master-0", org="system:masters")),
        "no-org": replace(client("master-0"), pem=make_csr("system:node:master-0", org=None)),
        "extra-subject-attr": replace(client("master-0"), pem=make_csr("system:node:master-0", extra=(ou,))),
        "cn-not-node": replace(client("master-0"), pem=make_csr("system:admin")),
        "client-with-sans": replace(client("master-0"), pem=make_csr("system:node:master-0",
                                                                    ips=("10.33.3.50",))),
        "client-existing-node": client("worker-1", "client-worker-1-again"),
        "client-wrong-requestor": replace(client("master-0"), username="system:anonymous"),
        "client-wrong-groups": replace(client("master-0"), groups=("system:authenticated",)),
        "client-masters-group": replace(client("master-0"), groups=(*CLIENT_GROUPS, "system:masters")),
        "serving-not-in-nodes-group": replace(m0, groups=("system:authenticated",)),
        "serving-by-bootstrapper": replace(m0, username=BOOTSTRAPPER),
        "garbage-pem": replace(client("master-0"), pem=b"-----BEGIN CERTIFICATE REQUEST-----\nnope\n"
                                                        b"-----END CERTIFICATE REQUEST-----\n"),
        "not-pem": replace(client("master-0"), pem=b"hello"),
        "two-pems": replace(client("master-0"), pem=client("master-0").pem * 2),
    }
    return {kind: replace(spec, name=kind) for kind, spec in cases.items()}
