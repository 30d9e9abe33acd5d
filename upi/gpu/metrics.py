"""Proof that the cluster's Prometheus has a GPU utilisation series for every GPU of every DGX.

With `gpu_pool.metrics` on, the ClusterPolicy's DCGM exporter has its
ServiceMonitor and the operator namespace carries
`openshift.io/cluster-monitoring: "true"` (upi.gpu.pool.for_pool,
upi.gpu.objects.namespace), so the platform Prometheus scrapes it. This module
asks the cluster whether it does.

How, after OpenShift's "Accessing monitoring APIs" (docs.redhat.com, OCP 4.x
monitoring, "Accessing metrics as an administrator"): the Thanos querier is the
route `thanos-querier` in `openshift-monitoring` (its host is the route's
`status.ingress[0].host`); only bearer tokens are accepted there, and the
token's account needs `get` on namespaces, which the cluster role
`cluster-monitoring-view` grants. The route is served by the default ingress
controller, whose CA the ingress operator publishes in the configmap
`openshift-config-managed/default-ingress-cert` (`ca-bundle.crt`): TLS is
verified against it, never skipped.

The token: the kubeconfig's own when it has one (a token, a token file, an
exec plugin: `oc login`'s kubeconfig). The installer's kubeconfig holds a
client certificate instead, which the route does not take; then upi keeps a
ServiceAccount `upi-gpu-metrics` in the operator namespace, bound to
`cluster-monitoring-view`, and asks the API for a short-lived token of it
(TokenRequest, POST .../serviceaccounts/<name>/token, authentication.k8s.io/v1:
kubernetes.io/docs/reference/kubernetes-api/authentication-resources/
token-request-v1), never written anywhere nor printed.

The query is Prometheus's instant query API (prometheus.io/docs/prometheus/
latest/querying/api: GET /api/v1/query, answer `{"status": "success", "data":
{"resultType": "vector", "result": [{"metric": {...}, "value": [t, "v"]}]}}`)
for `DCGM_FI_DEV_GPU_UTIL`, a default counter of dcgm-exporter
(NVIDIA/dcgm-exporter etc/default-counters.csv and dcp-metrics-included.csv,
the GPU Operator's choice). Each series carries `gpu` (the index), `UUID` and
the node: the GPU Operator runs the exporter with NODE_NAME = spec.nodeName
(gpu-operator assets/state-dcgm-exporter/0800_daemonset.yaml), which the
exporter writes as `Hostname` (internal/pkg/hostname, rendermetrics; `hostname`
since dcgm-exporter #655). GPUs in MIG mode report no DCGM_FI_DEV_GPU_UTIL
(NVIDIA/dcgm-exporter issues 105 and 216): those nodes are skipped.
"""

from __future__ import annotations

import json
import re
import ssl
from dataclasses import dataclass, field
from typing import Any

from upi.errors import ClusterError
from upi.gpu.kube import Kube
from upi.gpu.objects import Obj
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter

METRIC = "DCGM_FI_DEV_GPU_UTIL"
NODE_LABELS = ("Hostname", "hostname")  # dcgm-exporter's node label, before and after its #655
MONITORING_NS = "openshift-monitoring"
ROUTE = "thanos-querier"
INGRESS_CA = ("openshift-config-managed", "default-ingress-cert", "ca-bundle.crt")
VIEW_ROLE = "cluster-monitoring-view"
ACCOUNT = "upi-gpu-metrics"
TOKEN_SECONDS = 600  # TokenRequest's minimum lifetime: one run's queries, no longer
# The route's port: the default ingress controller serves routes on HTTPS 443 (through the load
# balancer's 443 frontend on bare metal). A module constant so a test's fake router can listen elsewhere.
ROUTER_PORT = 443
QUERY_SECONDS = 30.0
# A route's host is a DNS name (route.openshift.io validation): nothing else goes into the URL.
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


@dataclass
class NodeSeries:
    """What the querier holds for one node: its GPU indexes with a series."""

    node: str
    expected: int
    gpus: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        """A series for every GPU the node has."""
        return len(self.gpus) >= self.expected > 0

    def summary(self) -> str:
        """`8/8 GPUs` for the node's table row."""
        return f"{len(self.gpus)}/{self.expected} GPUs"


def bearer_of(kube: Kube) -> str | None:
    """The kubeconfig's bearer token (token, token file, exec plugin); None for a client certificate."""
    from upi.csr.credentials import bearer_token

    return bearer_token(kube.conn.http.auth)


def service_account_token(kube: Kube, namespace: str, changes: list[Change], reporter: Reporter,
                          *, reapply: bool = True) -> str:
    """A short-lived token of upi's ServiceAccount bound to cluster-monitoring-view (TokenRequest).

    `reapply=False` (`upi nodes add`): the account and binding day 1 made are
    left as they are; only a missing one is created.
    """
    from upi.gpu.install import apply_all

    objs: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{ACCOUNT}-{VIEW_ROLE}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": VIEW_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}]},
    ]
    if not reapply:
        objs = [o for o in objs if kube.get(o["apiVersion"], o["kind"], o["metadata"]["name"],
                                            o["metadata"].get("namespace")) is None]
    apply_all(kube, objs, changes, reporter)
    answer = kube.create_sub("v1", "ServiceAccount", ACCOUNT, namespace, "token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS}})
    token = (answer.get("status") or {}).get("token")
    if not isinstance(token, str) or not token:
        raise ClusterError(f"TokenRequest for ServiceAccount {namespace}/{ACCOUNT}: "
                           "no status.token in the answer")
    reporter.note(f"metrics: a {TOKEN_SECONDS // 60}-minute token of ServiceAccount {namespace}/{ACCOUNT} "
                  f"({VIEW_ROLE}): the kubeconfig has no bearer token")
    return token


def querier_host(kube: Kube) -> str:
    """The Thanos querier route's host, as admitted by the router."""
    route = kube.get("route.openshift.io/v1", "Route", ROUTE, MONITORING_NS)
    if route is None:
        raise GpuFailed(Diagnosis("metrics", f"Route {MONITORING_NS}/{ROUTE}", "the cluster has no Thanos "
                                  "querier route: cluster monitoring is not running",
                                  fix=f"oc get pods -n {MONITORING_NS}; or set gpu_pool.metrics: false"))
    ingress = (route.get("status") or {}).get("ingress") or []
    host = (ingress[0].get("host") if ingress and isinstance(ingress[0], dict) else None) or \
        (route.get("spec") or {}).get("host")
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        said = f"{host[:80]!r} is not a host name" if isinstance(host, str) and host else "it has no host"
        raise GpuFailed(Diagnosis("metrics", f"Route {MONITORING_NS}/{ROUTE}", f"the route's host: {said}",
                                  fix=f"oc get route -n {MONITORING_NS} {ROUTE} -o yaml"))
    return host


def ingress_ca(kube: Kube) -> tuple[str | None, str]:
    """(PEM of the ingress CA, where it came from); (None, ...) trusts the system store."""
    ns, name, key = INGRESS_CA
    cm = kube.get("v1", "ConfigMap", name, ns) or {}
    pem = (cm.get("data") or {}).get(key)
    if isinstance(pem, str) and pem.strip():
        return pem, f"the ingress CA (configmap {ns}/{name})"
    return None, f"the system's CA store (no configmap {ns}/{name})"


class Querier:
    """Prometheus's query API on the Thanos querier route: verified TLS, a bearer token, bounded reads."""

    def __init__(self, host: str, token: str, ca_pem: str | None, trusted: str) -> None:
        import httpx2

        from upi.csr.api import Api
        from upi.csr.deadline import BoundedTransport

        self.url = f"https://{host}" + ("" if ROUTER_PORT == 443 else f":{ROUTER_PORT}")
        self.trusted = trusted
        try:
            ctx = ssl.create_default_context(cadata=ca_pem)
        except (ssl.SSLError, ValueError) as exc:
            raise GpuFailed(Diagnosis("metrics", "the ingress CA", f"{trusted} is not PEM certificates "
                                      f"({exc})")) from None
        self.http = httpx2.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(QUERY_SECONDS), trust_env=False,
                                  transport=BoundedTransport(ctx))
        self.api = Api(self.http, deadline=QUERY_SECONDS)

    def close(self) -> None:
        """Release the connection."""
        self.http.close()

    def vector(self, query: str) -> list[Obj]:
        """The instant vector of a PromQL query; GpuFailed for TLS, auth and protocol failures."""
        import httpx2

        from upi.csr.api import ApiStatus

        where = f"Thanos querier {self.url}"
        try:
            raw = self.api.raw("GET", "/api/v1/query", params={"query": query})
        except ApiStatus as exc:
            fix = {401: "the token was refused: log in again (oc login) or use the installer's kubeconfig",
                   403: f"the account may not read metrics: bind it to {VIEW_ROLE}"}.get(exc.code, "")
            raise GpuFailed(Diagnosis("metrics", where, f"HTTP {exc.code}", fix=fix)) from None
        except httpx2.ConnectError as exc:
            said = str(exc)
            if "CERTIFICATE_VERIFY_FAILED" in said or "certificate verify failed" in said:
                raise GpuFailed(Diagnosis(
                    "metrics", where, _tls_problem(said, self.trusted),
                    fix="the route's certificate must chain to the default ingress CA and name the "
                        "route's host; upi never skips TLS verification")) from None
            raise GpuFailed(Diagnosis("metrics", where, f"cannot connect: {exc}",
                                      fix="check *.apps resolves to the load balancer and port 443 is open"))\
                from None
        except (httpx2.HTTPError, OSError, ClusterError) as exc:
            raise GpuFailed(Diagnosis("metrics", where, f"no answer: {exc}")) from None
        return _vector(raw, where)


def _tls_problem(said: str, trusted: str) -> str:
    """What OpenSSL's verify error means here: another CA, another host, or another reason."""
    reason = said.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0].strip(" )") or said
    if "issuer" in reason or "self-signed" in reason or "self signed" in reason:
        return f"its TLS certificate is not signed by {trusted}"
    if "mismatch" in reason:
        return f"its TLS certificate is not for this host ({reason})"
    return f"its TLS certificate does not verify against {trusted} ({reason})"


def _vector(raw: bytes, where: str) -> list[Obj]:
    try:
        doc: Any = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        said = doc.get("error") if isinstance(doc, dict) else None
        why = f": {str(said)[:200]}" if said else ""
        raise GpuFailed(Diagnosis("metrics", where, f"not a Prometheus query answer{why}"))
    data = doc.get("data") or {}
    result = data.get("result") if isinstance(data, dict) else None
    if data.get("resultType") != "vector" or not isinstance(result, list):
        raise GpuFailed(Diagnosis("metrics", where, "the answer is not an instant vector"))
    return [r for r in result if isinstance(r, dict) and isinstance(r.get("metric"), dict)]


def count_series(vector: list[Obj], found: dict[str, NodeSeries]) -> None:
    """Each series' node (Hostname/hostname) and GPU index, into `found`."""
    for series in vector:
        labels = series["metric"]
        node = next((labels[k] for k in NODE_LABELS if isinstance(labels.get(k), str)), None)
        gpu = labels.get("gpu")
        if node in found and isinstance(gpu, str):
            found[node].gpus.add(gpu)


def expected_gpus(kube: Kube, node: str, inventory_gpus: int | None) -> int:
    """The GPUs a node has: the inventory's `gpus`, else its allocatable nvidia.com/gpu."""
    if inventory_gpus:
        return inventory_gpus
    found = ((kube.get("v1", "Node", node) or {}).get("status") or {}).get("allocatable", {}).get(
        "nvidia.com/gpu", "0")
    try:
        return int(found)
    except (TypeError, ValueError):
        return 0


def prove_series(kube: Kube, nodes: dict[str, int | None], namespace: str, clock: Clock,
                 changes: list[Change], reporter: Reporter, *, reapply: bool = True) -> dict[str, NodeSeries]:
    """Poll the Thanos querier until every node has a series per GPU; GpuFailed naming the node short of them.

    `nodes`: node name -> the inventory's `gpus`. Series appear a few scrape
    intervals after the exporter starts: the wait is bounded by --timeout.
    `reapply`: see service_account_token.
    """
    found = {n: NodeSeries(n, expected_gpus(kube, n, gpus)) for n, gpus in nodes.items()}
    if not found:
        return found
    token = bearer_of(kube)
    if token is not None:
        reporter.note("metrics: querying with the kubeconfig's bearer token")
    else:
        token = service_account_token(kube, namespace, changes, reporter, reapply=reapply)
    host = querier_host(kube)
    ca_pem, trusted = ingress_ca(kube)
    querier = Querier(host, token, ca_pem, trusted)
    reporter.note(f"metrics: {METRIC} from {querier.url} (TLS verified by {trusted})")
    try:
        def complete() -> dict[str, NodeSeries] | None:
            for seen in found.values():
                seen.gpus.clear()
            count_series(querier.vector(METRIC), found)
            return found if all(s.ok for s in found.values()) else None

        def missing() -> Diagnosis:
            short = [s for s in found.values() if not s.ok]
            first = short[0]
            said = "no series" if not first.gpus else f"series for {first.summary()}"
            others = f" (also short: {', '.join(s.node for s in short[1:])})" if short[1:] else ""
            return Diagnosis("metrics", f"Node {first.node}",
                             f"the cluster's Prometheus has {said} of {METRIC}{others}",
                             fix=f"oc get pods -n {namespace} -l app=nvidia-dcgm-exporter -o wide: the "
                                 "exporter on that node must run; the ServiceMonitor nvidia-dcgm-exporter "
                                 "and the namespace label openshift.io/cluster-monitoring=true must be there")

        clock.wait_for(complete, missing)
    finally:
        querier.close()
    for seen in found.values():
        reporter.note(f"{seen.node}: {METRIC} for {seen.summary()}")
    return found
