"""Ask a registry (the v2 API) whether it holds an image's manifest, as a container runtime would.

Protocol facts, from the distribution spec (github.com/distribution/distribution,
docs/spec/api.md and docs/spec/auth/token.md; opencontainers/distribution-spec
spec.md):
- `GET /v2/` answers 200, or 401 with `WWW-Authenticate`, and a v2 registry
  sets `Docker-Distribution-API-Version: registry/2.0`;
- `HEAD /v2/<name>/manifests/<tag or digest>` answers 200 with
  `Docker-Content-Digest`, or 404 (unknown, or not in a media type the
  `Accept` header names: both OCI and Docker types are sent);
- 401 `WWW-Authenticate: Basic realm=...` asks for Basic credentials;
  `Bearer realm=...,service=...,scope=...` asks the client to get a token
  from `realm` (GET with `service` and `scope`, Basic credentials) whose JSON
  holds `token` (or `access_token`), then to send `Authorization: Bearer`;
- `GET /v2/<name>/tags/list?n=N` answers `{"name": ..., "tags": [...]}`
  (at most N tags; a `Link` header names the next page).

Credentials go only to the registry itself and to an https:// token realm.
Every exchange has an overall deadline (upi.watchdog).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlencode, urlsplit

from upi.watchdog import Watchdog

Verdict = Literal["found", "missing", "unauthorised", "unreachable"]
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
_PARAM = re.compile(r'([A-Za-z_]+)="([^"]*)"')
MAX_TOKEN_ANSWER = 1 << 20
MAX_TAGS_ANSWER = 4 << 20
TAGS_PAGE = 1000


@dataclass(frozen=True)
class Probe:
    """What the registry said about one manifest."""

    verdict: Verdict
    detail: str
    digest: str | None = None


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: dict[str, str]
    body: bytes = b""


class _Unreachable(Exception):
    """No usable answer: no connection, TLS refused, a deadline, not a registry."""


def trust(bundle: Path | None) -> ssl.SSLContext:
    """The system CAs plus the trust bundle (as the cluster trusts additionalTrustBundle)."""
    ctx = ssl.create_default_context()
    if bundle is not None:
        ctx.load_verify_locations(cafile=str(bundle))
    return ctx


class Registry:
    """One registry host[:port], spoken to over https with the given credentials."""

    def __init__(self, host: str, credentials: tuple[str, str] | None, context: ssl.SSLContext,
                 timeout: float = 10.0) -> None:
        self.host = host
        self._credentials = credentials
        self._ctx = context
        self._timeout = timeout
        self._tokens: dict[str, str] = {}  # scope -> bearer token

    def _basic(self) -> str | None:
        if self._credentials is None:
            return None
        user, password = self._credentials
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def _exchange(self, method: str, url: str, headers: dict[str, str], keep: int = 0) -> _Answer:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise _Unreachable(f"{url[:80]} is not an https:// URL")
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        with Watchdog(self._timeout * 2) as dog:
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=self._timeout,
                                               context=self._ctx)
            dog.conn = conn
            try:
                conn.request(method, target, headers={"User-Agent": "upi-check-mirror", **headers})
                resp = conn.getresponse()
                body = resp.read(keep) if keep else b""
                return _Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
            except ssl.SSLCertVerificationError as exc:
                raise _Unreachable(f"TLS certificate verify failed: {exc.verify_message or exc.reason} "
                                   f"(is the CA that signed "
                                   f"{parts.hostname}'s certificate in the trust bundle?)") from None
            except (OSError, http.client.HTTPException) as exc:
                if dog.fired:
                    raise _Unreachable(f"no answer within {self._timeout * 2:g} s") from None
                why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                raise _Unreachable(f"{why}") from None
            finally:
                conn.close()

    def _token(self, challenge: str, scope: str) -> str | None:
        params = dict(_PARAM.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith("https://"):
            raise _Unreachable(f"the token realm {realm[:80]!r} is not https://: no credentials sent")
        query = {k: v for k, v in params.items() if k == "service"}
        query["scope"] = params.get("scope", scope)
        headers = {}
        basic = self._basic()
        if basic:
            headers["Authorization"] = basic
        answer = self._exchange("GET", f"{realm}?{urlencode(query)}", headers, keep=MAX_TOKEN_ANSWER)
        if answer.status != 200:
            return None
        try:
            doc = json.loads(answer.body)
        except ValueError:
            raise _Unreachable("the token endpoint's answer is not JSON") from None
        token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        return str(token) if token else None

    def _authorised(self, method: str, url: str, headers: dict[str, str], scope: str,
                    keep: int = 0) -> _Answer:
        auth = self._tokens.get(scope)
        first = self._exchange(method, url, {**headers, **({"Authorization": auth} if auth else {})}, keep)
        if first.status != 401:
            return first
        challenge = first.headers.get("www-authenticate", "")
        kind = challenge.split(" ", 1)[0].lower()
        if kind == "bearer":
            token = self._token(challenge, scope)
            if token is None:
                return first
            self._tokens[scope] = f"Bearer {token}"
        elif kind == "basic" and self._basic():
            self._tokens[scope] = self._basic() or ""
        else:
            return first
        return self._exchange(method, url, {**headers, "Authorization": self._tokens[scope]}, keep)

    def ping(self) -> str | None:
        """None when the host speaks the registry v2 API, else why not."""
        try:
            answer = self._exchange("GET", f"https://{self.host}/v2/", {})
        except _Unreachable as exc:
            return str(exc)
        version = answer.headers.get("docker-distribution-api-version", "")
        if answer.status in (200, 401) and (version.startswith("registry/2") or answer.status == 200):
            return None
        return f"GET /v2/ answered HTTP {answer.status}: not a registry v2 API"

    def head_manifest(self, repository: str, reference: str) -> Probe:
        """Found / missing / unauthorised / unreachable for repository:reference (tag or digest)."""
        url = f"https://{self.host}/v2/{repository}/manifests/{reference}"
        scope = f"repository:{repository}:pull"
        try:
            answer = self._authorised("HEAD", url, {"Accept": ", ".join(MANIFEST_TYPES)}, scope)
        except _Unreachable as exc:
            return Probe("unreachable", str(exc))
        digest = answer.headers.get("docker-content-digest")
        if answer.status == 200:
            if reference.startswith("sha256:") and digest and digest != reference:
                return Probe("missing", f"the registry serves {digest} for this digest", digest)
            return Probe("found", f"HTTP 200 {answer.headers.get('content-type', '')}".strip(), digest)
        if answer.status == 404:
            return Probe("missing", "HTTP 404: no such manifest in this repository")
        if answer.status in (401, 403):
            who = "without credentials" if self._credentials is None else "with the pull secret's credentials"
            return Probe("unauthorised", f"HTTP {answer.status} {who}")
        return Probe("unreachable", f"HTTP {answer.status}")

    def tags(self, repository: str) -> tuple[list[str], str | None]:
        """The repository's tags (the first page of up to TAGS_PAGE), or [] and why not."""
        url = f"https://{self.host}/v2/{repository}/tags/list?n={TAGS_PAGE}"
        try:
            answer = self._authorised("GET", url, {}, f"repository:{repository}:pull", keep=MAX_TAGS_ANSWER)
        except _Unreachable as exc:
            return [], str(exc)
        if answer.status != 200:
            return [], f"HTTP {answer.status} listing the tags of {repository}"
        try:
            doc = json.loads(answer.body)
        except ValueError:
            return [], "the tag list is not JSON"
        found = doc.get("tags") if isinstance(doc, dict) else None
        return ([str(t) for t in found if isinstance(t, str)] if isinstance(found, list) else []), None
