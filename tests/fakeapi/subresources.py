"""The FAKE API server's subresources beyond /status: CSR /approval, Pod /eviction, ServiceAccount /token.

CertificateSigningRequests (certificates.k8s.io/v1, cluster-scoped): the
/approval subresource replaces status.conditions only, answers 409 Conflict
when the body's resourceVersion is not the current one (none at all is an
unconditional update, as for every CSR write) and 422 for duplicate
or conflicting conditions (pkg/apis/certificates/validation), and takes the
protobuf body kubectl sends (tests/kube_proto.py, decoded in fakeapi/handler.py).
Tests see what was approved (approved, approval_order, approval_puts);
`conflicts_to_inject` makes the next approvals meet another writer.

Draining a node (kubernetes.io docs, "API-initiated Eviction" and "Safely
Drain a Node"; pkg/registry/core/pod/storage/eviction.go): POST
.../pods/<name>/eviction with a policy/v1 Eviction answers 429
TooManyRequests while a PodDisruptionBudget whose selector matches the pod
allows no disruption, 500 when more than one matches, else takes one from the
budget's status.disruptionsAllowed and deletes the pod (201); a pod that
Succeeded or Failed goes without asking the budget.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
import uuid

from kube_wire import status

from fakeapi.kinds import Obj, now
from fakeapi.selectors import matches
from fakeapi.writes import Writes


class Subresources(Writes):
    """The subresource verbs, and what tests read of them (approvals, evictions, tokens issued)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: dict[str, tuple[str, str]] = {}  # TokenRequest tokens issued -> (namespace, account)
        # CSRs: when each was created and approved (monotonic), the approvals' order, PUTs seen.
        self.created_at: dict[str, float] = {}
        self.approved_at: dict[str, float] = {}
        self.approval_order: list[str] = []
        self.approval_puts = 0
        self.conflicts_to_inject = 0
        self.evictions: list[tuple[str, str, int]] = []  # (namespace, pod, HTTP status answered)

    def token_request(self, ns: str, name: str, body: Obj) -> tuple[int, Obj]:
        """POST serviceaccounts/<name>/token: a bound token of the account (authentication.k8s.io/v1).

        After kubernetes pkg/registry/core/serviceaccount/storage/token.go and the
        TokenRequest reference (kubernetes.io/docs/reference/kubernetes-api/
        authentication-resources/token-request-v1): 201 with the request echoed and
        status.token / status.expirationTimestamp; the account must exist; a
        lifetime under 10 minutes is Invalid.
        """
        with self.lock:
            if (self.kind("v1", "ServiceAccount"), ns, name) not in self.objects:
                return 404, status(404, "NotFound", f'serviceaccounts "{name}" not found')
            seconds = (body.get("spec") or {}).get("expirationSeconds", 3600)
            if not isinstance(seconds, int) or seconds < 600:
                return 422, status(422, "Invalid", f"spec.expirationSeconds: Invalid value: {seconds}: may "
                                   "not specify a duration less than 10 minutes")
            token = "eyJhbGciOiJSUzI1NiJ9." + uuid.uuid4().hex + uuid.uuid4().hex
            self.tokens[token] = (ns, name)
        expires = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 201, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": seconds},
                     "status": {"token": token, "expirationTimestamp": expires}}

    def approve(self, name: str, body: Obj) -> tuple[int, Obj]:
        """PUT .../certificatesigningrequests/<name>/approval: status.conditions replaced, nothing else."""
        k = self.kind("certificates.k8s.io/v1", "CertificateSigningRequest")
        with self.lock:
            self.approval_puts += 1
            old = self.objects.get((k, "", name))
            if old is None:
                return 404, k.not_found(name)
            if self.conflicts_to_inject > 0:
                self.conflicts_to_inject -= 1
                self._touch((k, "", name))
            # No resourceVersion is an unconditional update (pkg/registry/certificates/certificates/
            # strategy.go: AllowUnconditionalUpdate is true); a stale one is a conflict.
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent and sent != old["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", "Operation cannot be fulfilled on certificatesigning"
                                   f'requests.certificates.k8s.io "{name}": the object has been modified;'
                                   " please apply your changes to the latest version and try again")
            conds = list(body.get("status", {}).get("conditions") or [])
            types = [c.get("type") for c in conds]
            if len(types) != len(set(types)) or {"Approved", "Denied"} <= set(types):
                return 422, status(422, "Invalid", f'CertificateSigningRequest.certificates.k8s.io "{name}" '
                                   "is invalid: status.conditions: duplicate or conflicting conditions")
            for c in conds:
                c.setdefault("lastUpdateTime", now())
                c.setdefault("lastTransitionTime", c["lastUpdateTime"])
            new = copy.deepcopy(old)
            new["status"]["conditions"] = conds
            self._store((k, "", name), new, old, "kube-apiserver")
            if "Approved" in types and name not in self.approved_at:
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            out = copy.deepcopy(self.objects[(k, "", name)])
        self.run_controllers()
        return 200, out

    def evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        """The Eviction subresource (pkg/registry/core/pod/storage/eviction.go), answered and recorded."""
        with self.lock:
            code, doc = self._evict(namespace, name)
            self.evictions.append((namespace, name, code))
        self.run_controllers()
        return code, doc

    def _evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        pod = self.get("v1", "Pod", name, namespace)
        if pod is None:
            return 404, self.kind("v1", "Pod").not_found(name)
        budgets = [] if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") else [
            b for b in self.list("policy/v1", "PodDisruptionBudget", namespace)
            if matches(b["spec"].get("selector") or {}, pod["metadata"].get("labels") or {})]
        if len(budgets) > 1:
            return 500, status(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                               "which the eviction subresource does not support.")
        if budgets:
            budget = budgets[0]
            allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
            if allowed < 1:
                return 429, status(429, "TooManyRequests", "Cannot evict pod as it would violate "
                                   "the pod's disruption budget.")
            self.set_status("policy/v1", "PodDisruptionBudget", budget["metadata"]["name"], namespace,
                            {**budget["status"], "disruptionsAllowed": allowed - 1})
        self.delete("v1", "Pod", name, namespace)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
