"""The FAKE API server itself: the store and its verbs served over TLS, and a ticker for controllers.

No kube-apiserver can run here (reference csr.md). TLS with a self-made CA, and a
kubeconfig shaped like the one openshift-install writes (auth/kubeconfig,
tests/kube_tls.py).
"""

from __future__ import annotations

import ssl
import threading
import time
from pathlib import Path

from kube_tls import serve_tls
from kube_wire import Tamper

from fakeapi.cluster import Cluster
from fakeapi.handler import Handler


class FakeApiServer(Cluster):
    """The store, the server and its kubeconfig; `controllers` run after every write."""

    def __init__(self, workdir: Path) -> None:
        super().__init__()
        self.pod_logs: dict[tuple[str, str, str], str] = {}
        self.requests: list[tuple[str, str, str]] = []  # (method, path, content type)
        # Misbehaviour on demand: raw bytes instead of the answer (see fakeapi/handler.py).
        self.tamper: Tamper | None = None
        # Users' bearer tokens the API accepts beside the admin client certificate (ServiceAccount
        # tokens issued by token_request, in `tokens`, are accepted too, as the real server does).
        self.user_tokens: set[str] = set()
        # A client without the admin certificate may still bring a bearer token; with neither it gets 401.
        tls = serve_tls(workdir, Handler, self, verify=ssl.CERT_OPTIONAL)
        self.httpd, self.url, self.kubeconfig, self.ca_pem = tls
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._ticker = threading.Thread(target=self._tick_forever, daemon=True)

    def start(self) -> FakeApiServer:
        self._thread.start()
        self._ticker.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _tick_forever(self) -> None:
        # Controllers also act on time (a CSV takes a few ticks to succeed).
        while not self.closed:
            self.run_controllers()
            time.sleep(0.05)
