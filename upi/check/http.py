"""`upi check http`: the RHCOS artifacts and each role's ignition can be fetched.

Artifacts must answer 200 with content; ignition must be JSON with
`ignition.version` and young enough (`upi.facts.freshness`), judged from the
HTTP `Last-Modified` header.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

from upi.check.report import CheckResult, Verdict
from upi.facts.boot import artifact_url, ignition_url
from upi.facts.freshness import ignition_freshness
from upi.inventory import Inventory

AREA = "http"
IGNITION_LIMIT = 32 * 1024 * 1024


@dataclass(frozen=True)
class Target:
    """One URL to fetch; `ignition` ones are parsed and aged too."""

    what: str
    url: str
    ignition: bool


def targets(inv: Inventory) -> list[Target]:
    """Kernel, initramfs, rootfs (or metal image), then one ignition file per role present."""
    r = inv.rhcos
    arts = [("kernel", r.kernel), ("initramfs", r.initramfs), ("rootfs", r.rootfs),
            ("image", r.image)]
    out = [Target(what, artifact_url(inv, v), False) for what, v in arts if v]
    seen: set[str] = set()
    for node in inv.nodes:
        if node.role.value not in seen:
            seen.add(node.role.value)
            out.append(Target(f"{node.role.value}.ign", ignition_url(inv, node), True))
    return out


def redirect(url: str, base: str, server: str | None, port: int | None) -> str:
    """`url` with host/port replaced when it lives under `base` (the provisioner's server)."""
    if not (server or port) or not url.startswith(base):
        return url
    parts = urlsplit(url)
    host = server or parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{port or parts.port}" if (port or parts.port) else host
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class Fetched:
    """Status, headers and (up to a limit) the body, or `error`."""

    status: int = 0
    body: bytes = b""
    last_modified: str | None = None
    length: str | None = None
    error: str = ""


def fetch(url: str, *, limit: int, timeout: float, retries: int) -> Fetched:
    """GET `url` directly (never through a proxy from the environment); retry on network errors."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    error = ""
    for _ in range(retries + 1):
        try:
            with opener.open(url, timeout=timeout) as resp:  # noqa: S310 - http(s) URLs from the inventory
                return Fetched(resp.status, resp.read(limit), resp.headers.get("Last-Modified"),
                               resp.headers.get("Content-Length"))
        except urllib.error.HTTPError as exc:
            return Fetched(exc.code, error=f"HTTP {exc.code} {exc.reason}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            error = str(getattr(reason, "strerror", None) or reason)
    return Fetched(error=error)


def _artifact(t: Target, f: Fetched) -> CheckResult:
    label = f"GET {t.what}"
    if f.error or not f.body:
        got = f.error or f"HTTP {f.status}, empty"
        return CheckResult(AREA, label, "200 with content", got, "fail",
                           f"{t.url}: {got}; put the RHCOS {t.what} there "
                           "(URLs from `openshift-install coreos print-stream-json`)")
    size = f"{int(f.length):,} bytes" if f.length and f.length.isdigit() else "content"
    return CheckResult(AREA, label, "200 with content", f"{f.status}, {size}", "pass")


def _ignition(t: Target, f: Fetched, now: datetime) -> list[CheckResult]:
    label = f"GET {t.what}"
    expected = "ignition JSON"
    fix = f"{t.url}: {{}}; run `upi ignition` to make and copy the ignition files"
    if f.error:
        return [CheckResult(AREA, label, expected, f.error, "fail", fix.format(f.error))]
    try:
        doc = json.loads(f.body)
        version = doc["ignition"]["version"]
        if not isinstance(version, str):
            raise TypeError(version)
    except (ValueError, KeyError, TypeError):
        return [CheckResult(AREA, label, expected, "not ignition JSON", "fail",
                            fix.format("not JSON with ignition.version"))]
    rows = [CheckResult(AREA, label, expected, f"ignition {version}, {len(f.body):,} bytes", "pass")]
    age_label = f"age of {t.what}"
    if not f.last_modified:
        rows.append(CheckResult(AREA, age_label, "under 12 h", "no Last-Modified", "warn",
                                f"{t.url}: the server sends no Last-Modified header; "
                                "cannot tell how old its certificates are"))
        return rows
    fresh = ignition_freshness(parsedate_to_datetime(f.last_modified), now)
    hours = f"{fresh.age.total_seconds() / 3600:.1f} h"
    verdicts: dict[str, Verdict] = {"ok": "pass", "warn": "warn", "expired": "fail"}
    rows.append(CheckResult(AREA, age_label, "under 12 h", hours, verdicts[fresh.level],
                            "" if fresh.level == "ok" else f"{t.what}: {fresh.message}"))
    return rows


def check_http(inv: Inventory, *, server: str | None = None, port: int | None = None,
               timeout: float = 5.0, retries: int = 1, workers: int = 8,
               now: datetime | None = None) -> list[CheckResult]:
    """Fetch every artifact and ignition URL (from `server`/`port` when given)."""
    now = now or datetime.now(UTC)
    base = inv.provisioner.http_base_url
    todo = [Target(t.what, redirect(t.url, base, server, port), t.ignition) for t in targets(inv)]

    def one(t: Target) -> list[CheckResult]:
        f = fetch(t.url, limit=IGNITION_LIMIT if t.ignition else 1, timeout=timeout,
                  retries=retries)
        return _ignition(t, f, now) if t.ignition else [_artifact(t, f)]

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return [row for rows in pool.map(one, todo) for row in rows]
