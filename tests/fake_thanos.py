"""A FAKE Thanos querier behind OpenShift's router: Prometheus's query API over the cluster's GPU series.

No OpenShift monitoring stack runs here. This follows the real pieces:

- the route `thanos-querier` in `openshift-monitoring`, its host in
  `status.ingress[0].host` (OpenShift docs, "Accessing metrics as an
  administrator"), served over TLS by the router with a certificate of the
  ingress operator's own CA, which the operator publishes as `ca-bundle.crt`
  in the configmap `openshift-config-managed/default-ingress-cert`;
- only bearer tokens (the same docs): none or an unknown one is 401, an
  account without `get` on namespaces -- granted by the cluster role
  `cluster-monitoring-view` -- is 403 (kube-rbac-proxy in front of the
  querier: brancz/kube-rbac-proxy, its "Forbidden (user=..., verb=get,
  resource=namespaces...)" answer);
- Prometheus's HTTP API (prometheus.io/docs/prometheus/latest/querying/api):
  GET /api/v1/query?query=..., `{"status": "success", "data": {"resultType":
  "vector", "result": [{"metric": {...}, "value": [<unix time>, "<value>"]}]}}`;
  a query it cannot parse is 400 with `{"status": "error", "errorType":
  "bad_data", "error": ...}`;
- the series of the GPU Operator's dcgm-exporter (NVIDIA/dcgm-exporter
  internal/pkg/rendermetrics: `gpu`, `UUID`, `pci_bus_id`, `device`,
  `modelName`, `Hostname` = NODE_NAME, from gpu-operator
  assets/state-dcgm-exporter/0800_daemonset.yaml) plus the target labels
  Prometheus adds from the ServiceMonitor (assets/state-dcgm-exporter/
  0500_service_monitor.yaml: job from the `app` label, endpoint
  `gpu-metrics`): a node's series exist once the ClusterPolicy enables the
  exporter and its ServiceMonitor, the operator namespace is labelled
  `openshift.io/cluster-monitoring=true`, and the node runs the operator
  (`nvidia.com/gpu.present=true`), from `lag` seconds (the scrape intervals)
  on. A GPU in MIG mode reports no DCGM_FI_DEV_GPU_UTIL (NVIDIA/dcgm-exporter
  issues 105 and 216).

The one thing not as in a cluster: the route's host is `localhost` and the
router listens on a loopback port, not 443 (nothing here resolves *.apps, and
no test may take port 443). While this fake runs, upi's router port
(upi.gpu.metrics.ROUTER_PORT) is its port; `stop` puts 443 back.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from certs import TlsHttpServer, issue, make_ca
from fake_apiserver import FakeApiServer, Obj

HOST = "localhost"
MONITORING = "openshift-monitoring"
VIEW_ROLE = "cluster-monitoring-view"
METRIC_LABEL = "openshift.io/cluster-monitoring"


class FakeThanos:
    """The querier route, the ingress CA configmap, and a TLS server answering queries from the cluster."""

    def __init__(self, workdir: Path, api: FakeApiServer, gpus: dict[str, int]) -> None:
        self.api = api
        self.gpus = gpus  # node -> GPUs it has
        self.lag = 0.15  # seconds from an exporter's start to its first scraped series
        self.missing: set[str] = set()  # nodes whose exporter is never scraped (pod crash-looping)
        self.short: dict[str, int] = {}  # node -> GPUs its exporter reports (a GPU DCGM cannot read)
        self.node_label = "Hostname"  # dcgm-exporter >= the rename (#655) writes `hostname`
        self.admin_tokens: set[str] = set()  # bearer tokens of cluster admins (an `oc login` kubeconfig)
        self.queries: list[tuple[str, str]] = []  # (query, who) of each answered request
        self.tokens_seen: list[str] = []  # every Authorization header value, for "never printed" tests
        self._started: dict[str, float] = {}
        self.ca = make_ca(f"ingress-operator@{int(time.time())}")
        cert = issue(self.ca, HOST, server=True)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "router.crt").write_bytes(cert.cert_pem)
        (workdir / "router.key").write_bytes(cert.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(workdir / "router.crt", workdir / "router.key")
        self.httpd = TlsHttpServer(("127.0.0.1", 0), _Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                            do_handshake_on_connect=False)
        self.httpd.fake = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def seed(self) -> None:
        """What an installed cluster holds: the monitoring namespace, the querier's route, the ingress CA."""
        put = self.api.put
        for ns in (MONITORING, "openshift-config-managed"):
            put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        put({"apiVersion": "route.openshift.io/v1", "kind": "Route",
             "metadata": {"name": "thanos-querier", "namespace": MONITORING},
             "spec": {"host": HOST, "path": "/api", "port": {"targetPort": "web"},
                      "tls": {"termination": "reencrypt", "insecureEdgeTerminationPolicy": "Redirect"},
                      "to": {"kind": "Service", "name": "thanos-querier", "weight": 100}},
             "status": {"ingress": [{"host": HOST, "routerName": "default", "wildcardPolicy": "None",
                                     "conditions": [{"type": "Admitted", "status": "True"}]}]}})
        self.publish_ca(self.ca.cert_pem)

    def publish_ca(self, pem: bytes) -> None:
        """The ingress operator's configmap of its CA (a test puts another CA here)."""
        self.api.put({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "default-ingress-cert", "namespace": "openshift-config-managed"},
                      "data": {"ca-bundle.crt": pem.decode()}})

    def start(self) -> None:
        import upi.gpu.metrics

        self._thread.start()
        upi.gpu.metrics.ROUTER_PORT = self.port  # the one override: a port (see the module's docstring)

    def stop(self) -> None:
        import upi.gpu.metrics

        upi.gpu.metrics.ROUTER_PORT = 443
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- who may query --------------------------------------------------------------
    def identity(self, header: str) -> tuple[int, str]:
        """(HTTP code, user): 401 without a known token, 403 without cluster-monitoring-view."""
        self.tokens_seen.append(header)
        if not header.startswith("Bearer "):
            return 401, ""
        token = header.removeprefix("Bearer ")
        if token in self.admin_tokens:
            return 200, "kube:admin"
        account = self.api.tokens.get(token)
        if account is None:
            return 401, ""
        ns, name = account
        user = f"system:serviceaccount:{ns}:{name}"
        for crb in self.api.list("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
            if (crb.get("roleRef") or {}).get("name") != VIEW_ROLE:
                continue
            if any(s.get("kind") == "ServiceAccount" and s.get("name") == name and s.get("namespace") == ns
                   for s in crb.get("subjects") or []):
                return 200, user
        return 403, user

    # --- what Prometheus scraped ---------------------------------------------------------
    def _scraped(self) -> tuple[str, list[Obj]]:
        """(operator namespace, nodes whose exporter the cluster's Prometheus scrapes)."""
        policy = self.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
        if policy is None:
            return "", []
        exporter = policy["spec"].get("dcgmExporter") or {}
        ns = (policy.get("status") or {}).get("namespace") or ""
        namespace = self.api.get("v1", "Namespace", ns) if ns else None
        watched = ((namespace or {}).get("metadata", {}).get("labels") or {}).get(METRIC_LABEL) == "true"
        if exporter.get("enabled") is False or not (exporter.get("serviceMonitor") or {}).get("enabled") \
                or not watched:
            return ns, []
        return ns, [n for n in self.api.list("v1", "Node")
                    if (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.present") == "true"]

    def series(self, metric: str) -> list[Obj]:
        """The instant vector of `metric` now."""
        ns, nodes = self._scraped()
        now = time.time()
        out: list[Obj] = []
        for node in nodes:
            name = node["metadata"]["name"]
            labels = node["metadata"].get("labels") or {}
            started = self._started.setdefault(name, time.monotonic())
            mig = labels.get("nvidia.com/mig.config", "all-disabled") != "all-disabled"
            if name in self.missing or time.monotonic() - started < self.lag:
                continue
            if metric == "DCGM_FI_DEV_GPU_UTIL" and mig:
                continue
            pod = f"nvidia-dcgm-exporter-{uuid.uuid5(uuid.NAMESPACE_DNS, name).hex[:5]}"
            for gpu in range(self.short.get(name, self.gpus.get(name, 0))):
                out.append({"metric": {
                    "__name__": metric, "gpu": str(gpu),
                    "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{name}/{gpu}')}",
                    "pci_bus_id": f"00000000:{0x18 + 0x10 * gpu:02X}:00.0", "device": f"nvidia{gpu}",
                    "modelName": labels.get("nvidia.com/gpu.product", "").replace("-", " "),
                    self.node_label: name, "DCGM_FI_DRIVER_VERSION": "580.65.06",
                    "container": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics",
                    "instance": f"10.128.2.{10 + gpu}:9400", "job": "nvidia-dcgm-exporter",
                    "namespace": ns, "pod": pod, "service": "nvidia-dcgm-exporter"},
                    "value": [round(now, 3), "0"]})
        return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's signature
        pass

    def _send(self, code: int, doc: Obj | str) -> None:
        body = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8" if isinstance(doc, str)
                         else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        fake: FakeThanos = self.server.fake  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        code, user = fake.identity(self.headers.get("Authorization", ""))
        if code == 401:
            self._send(401, "Unauthorized\n")
            return
        if code == 403:
            self._send(403, f"Forbidden (user={user}, verb=get, resource=namespaces, subresource=)\n")
            return
        if url.path != "/api/v1/query":
            self._send(404, "404 page not found\n")
            return
        query = (parse_qs(url.query).get("query") or [""])[-1]
        if not query or not query.replace("_", "").isalnum():
            self._send(400, {"status": "error", "errorType": "bad_data",
                             "error": f"invalid parameter \"query\": 1:1: parse error: {query[:40]!r}"})
            return
        fake.queries.append((query, user))
        self._send(200, {"status": "success", "data": {"resultType": "vector", "result": fake.series(query)}})
