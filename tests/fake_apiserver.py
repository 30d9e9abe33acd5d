"""The FAKE Kubernetes API server of every test: any resource kind, the real REST protocol.

No kube-apiserver can run here (reference csr.md), so this speaks what upi's
clients, lightkube and kubectl use, as the real server does. This module is its
public name (`from fake_apiserver import FakeApiServer`); the fake lives in
tests/fakeapi/, one concern a module, each citing the upstream source it follows:

- fakeapi/kinds.py: the served kinds (group, version, plural, scope, /status,
  short names); discovery is generated from them;
- fakeapi/store.py: the objects, resourceVersions, watch events, CRD schema and
  core validation (422 Invalid), withheld kinds, controllers after every write;
- fakeapi/writes.py: create, replace, merge patch, server-side apply with field
  managers, the /status subresource split;
- fakeapi/subresources.py: CSR /approval, Pod /eviction against
  PodDisruptionBudgets, ServiceAccount /token (TokenRequest);
- fakeapi/cluster.py: what tests add in-process and read back (CSRs, Nodes,
  Pods, PDBs, Secrets, ClusterVersion);
- fakeapi/handler.py: client-certificate and bearer-token authentication,
  routing, the HTTP verbs, discovery and Table output, chunked watches, pod
  logs, label and field selectors (fakeapi/selectors.py);
- fakeapi/server.py: TLS (tests/kube_tls.py), the serving and ticker threads.
"""

from __future__ import annotations

from fakeapi.kinds import KINDS, Kind, Obj, now
from fakeapi.server import FakeApiServer
from fakeapi.store import SchemaRejected

__all__ = ["KINDS", "FakeApiServer", "Kind", "Obj", "SchemaRejected", "now"]
