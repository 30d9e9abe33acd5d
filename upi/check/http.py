"""`upi check http`: the RHCOS artifacts and each role's ignition can be fetched.

Artifacts must answer 200 with content; ignition must be JSON with
`ignition.version` and young enough (`upi.facts.freshness`), judged from the
HTTP `Last-Modified` header. With `deep`, every file the render directory
stages under `http/` is read to the end and its sha256 compared.

Everything a server sends is hostile: headers are parsed strictly, JSON depth
and size are bounded and each fetch has an overall deadline (`httpget`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from upi.check.httpget import Fetched, fetch
from upi.check.reach import Miss, endpoint, hint
from upi.check.report import CheckResult, Verdict
from upi.facts.boot import artifact_url, ignition_url
from upi.facts.freshness import ignition_freshness
from upi.inventory import Inventory
from upi.safefs import kind_of, relpath, shown

AREA = "http"
IGNITION_LIMIT = 32 * 1024 * 1024


DEEP_BYTES_PER_SECOND = 1024 * 1024  # --deep allows --timeout plus one second per MiB staged
FUTURE_SKEW = timedelta(minutes=5)  # clocks disagree a little; more than this is a wrong clock
_LENGTH = re.compile(r"[0-9]{1,18}")  # ASCII digits only: int() would take '²' and '1_0'


@dataclass(frozen=True)
class Target:
    """One URL to fetch; `ignition` ones are parsed and aged too; `rel` is its path under http/."""

    what: str
    url: str
    ignition: bool
    rel: str | None = None


def under_base(url: str, base: str) -> str | None:
    """The path of `url` below `base` (http_base_url), or None when it lives elsewhere."""
    prefix = base.rstrip("/") + "/"
    return url[len(prefix):] if url.startswith(prefix) else None


def targets(inv: Inventory) -> list[Target]:
    """Kernel, initramfs, rootfs (or metal image), then one ignition file per role present."""
    r = inv.rhcos
    base = inv.provisioner.http_base_url
    arts = [("kernel", r.kernel), ("initramfs", r.initramfs), ("rootfs", r.rootfs),
            ("image", r.image)]
    urls = [(what, artifact_url(inv, v), False) for what, v in arts if v]
    seen: set[str] = set()
    for node in inv.nodes:
        if node.role.value not in seen:
            seen.add(node.role.value)
            urls.append((f"{node.role.value}.ign", ignition_url(inv, node), True))
    return [Target(what, url, ign, under_base(url, base)) for what, url, ign in urls]


def redirect(url: str, base: str, server: str | None, port: int | None) -> str:
    """`url` with host/port replaced when it lives under `base` (the provisioner's server)."""
    if not (server or port) or under_base(url, base) is None:
        return url
    parts = urlsplit(url)
    host = server or parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{port or parts.port}" if (port or parts.port) else host
    return urlunsplit(parts._replace(netloc=netloc))


def content_length(value: str | None) -> int | None:
    """A Content-Length header as a number; None when absent or not plain digits."""
    if value is None:
        return None
    digits = value.strip(" \t")  # HTTP's optional whitespace only: str.strip() also eats \x1f
    return int(digits) if _LENGTH.fullmatch(digits) else None


def last_modified(value: str) -> datetime | None:
    """An HTTP date as an aware UTC datetime; None when it is not one."""
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when  # HTTP dates are GMT


STAGE_RHCOS = ("stage it with `upi images INVENTORY -o DIR --from SRC`, then publish it with "
               "`upi push INVENTORY -o DIR`")
STAGE_IGNITION = ("make and stage them with `upi ignition INVENTORY --dir ASSETS -o DIR`, then "
                  "publish them with `upi push INVENTORY -o DIR`")


def _unreached(t: Target, f: Fetched, inv: Inventory) -> str | None:
    """The fix when the server could not be reached or has no such file, by cause; else None."""
    parts = urlsplit(t.url)
    host = parts.hostname or ""
    try:
        where = endpoint(host, parts.port or (443 if parts.scheme == "https" else 80))
    except ValueError:
        where = host
    if f.status == 404:
        what = "the ignition files" if t.ignition else f"the RHCOS {t.what}"
        return f"{t.url}: {f.error}: the server does not have {what}: " + (
            STAGE_IGNITION if t.ignition else STAGE_RHCOS)
    if f.status == 403:
        return (f"{t.url}: {f.error}: the web server may not read it: files under its root must "
                "be world-readable and labelled httpd_sys_content_t (`upi push` sets both)")
    if f.cause in ("no route", "unreachable", "refused", "timeout", "no name"):
        return f"{t.url}: " + hint(
            Miss(f.cause, f.error), inv, host, where,  # type: ignore[arg-type]
            listens=f"start the web server that serves {inv.provisioner.http_base_url} there",
            firewall="firewall/provisioner.sh", redirect="--server/--port")
    return None


def _artifact(t: Target, f: Fetched, inv: Inventory) -> CheckResult:
    label = f"GET {t.what}"
    if f.error or not f.size:
        got = f.error or f"HTTP {f.status}, empty"
        return CheckResult(AREA, label, "200 with content", got, "fail",
                           _unreached(t, f, inv) or f"{t.url}: {got}; {STAGE_RHCOS}")
    length = content_length(f.length)
    size = f"{f.size:,} bytes" if f.complete else f"{length:,} bytes" if length else "content"
    return CheckResult(AREA, label, "200 with content", f"{f.status}, {size}", "pass")


def _version(body: bytes) -> str | None:
    """ignition.version of a JSON body, or None when it is not ignition JSON (however hostile)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    ign = doc.get("ignition") if isinstance(doc, dict) else None
    version = ign.get("version") if isinstance(ign, dict) else None
    return version[:40] if isinstance(version, str) else None


def _age(t: Target, f: Fetched, now: datetime) -> CheckResult:
    label = f"age of {t.what}"
    if not f.last_modified:
        return CheckResult(AREA, label, "under 12 h", "no Last-Modified", "warn",
                           f"{t.url}: the server sends no Last-Modified header; "
                           "cannot tell how old its certificates are")
    made = last_modified(f.last_modified)
    if made is None:
        return CheckResult(AREA, label, "under 12 h", "unreadable Last-Modified", "warn",
                           f"{t.url}: Last-Modified {f.last_modified[:60]!r} is not an HTTP date; "
                           "cannot tell how old its certificates are")
    if made > now + FUTURE_SKEW:
        ahead = f"{(made - now).total_seconds() / 3600:.1f} h"
        return CheckResult(AREA, label, "under 12 h", f"{ahead} in the future", "warn",
                           f"{t.url}: Last-Modified is {ahead} ahead of this host's clock; one "
                           "of the clocks is wrong, so the age (and the certificates' 24 h) "
                           "cannot be judged: fix the time (chrony) on both")
    fresh = ignition_freshness(made, now)
    verdicts: dict[str, Verdict] = {"ok": "pass", "warn": "warn", "expired": "fail"}
    hours = f"{max(fresh.age.total_seconds(), 0) / 3600:.1f} h"
    return CheckResult(AREA, label, "under 12 h", hours, verdicts[fresh.level],
                       "" if fresh.level == "ok" else f"{t.what}: {fresh.message}")


def _ignition(t: Target, f: Fetched, now: datetime, inv: Inventory) -> list[CheckResult]:
    label = f"GET {t.what}"
    expected = "ignition JSON"
    fix = f"{t.url}: {{}}; run `upi ignition` to make and copy the ignition files"
    if f.error:
        return [CheckResult(AREA, label, expected, f.error, "fail",
                            _unreached(t, f, inv) or fix.format(f.error))]
    if not f.complete:
        why = f"larger than {IGNITION_LIMIT:,} bytes"
        return [CheckResult(AREA, label, expected, why, "fail", fix.format(why))]
    version = _version(f.body)
    if version is None:
        return [CheckResult(AREA, label, expected, "not ignition JSON", "fail",
                            fix.format("not JSON with ignition.version"))]
    return [CheckResult(AREA, label, expected, f"ignition {version}, {f.size:,} bytes", "pass"),
            _age(t, f, now)]


@dataclass(frozen=True)
class Staged:
    """The copy of a target in the render directory: its size and sha256, or why it is unusable."""

    path: Path
    size: int = 0
    sha256: str = ""
    error: str = ""


def staged(render_dir: Path, rel: str) -> Staged | None:
    """`render_dir/http/rel` hashed as it is streamed; None when it is not there.

    The path is treated as hostile: it must stay inside `render_dir/http`, and a
    symlink, FIFO or device is refused before a byte is read.
    """
    root = render_dir / "http"
    path = root / rel
    if relpath(rel) is None:
        return Staged(path, error="not a plain path below http/")
    try:
        if not path.resolve().is_relative_to(root.resolve()):
            return Staged(path, error="leads outside the render directory")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError) as exc:  # ELOOP for a symlink; RuntimeError: a symlink loop
        return Staged(path, error=getattr(exc, "strerror", None) or str(exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Staged(path, error=f"{kind_of(st.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
        sha, size = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            sha.update(chunk)
            size += len(chunk)
        return Staged(path, size, sha.hexdigest())
    except OSError as exc:
        return Staged(path, error=exc.strerror or str(exc))
    finally:
        os.close(fd)


def _compare(t: Target, f: Fetched, local: Staged) -> CheckResult:
    label = f"sha256 of {t.what}"
    if local.error:
        return CheckResult(AREA, label, "as staged", "unreadable staged copy", "fail",
                           f"{shown(local.path)}: {local.error}")
    expected = f"as staged ({local.size:,} bytes)"
    if f.error:
        return CheckResult(AREA, label, expected, f.error, "fail", f"{t.url}: {f.error}")
    if f.complete and f.size == local.size and f.sha256 == local.sha256:
        return CheckResult(AREA, label, expected, f"same ({local.sha256[:12]})", "pass")
    got = f"{f.size:,}+ bytes" if not f.complete else f"{f.size:,} bytes, sha256 {f.sha256[:12]}"
    return CheckResult(AREA, label, expected, f"differs ({got})", "fail",
                       f"{t.url} is not the file staged in {shown(local.path)} (sha256 "
                       f"{local.sha256[:12]}): run `upi push`, or stage the right file again")


def _not_staged(t: Target, render_dir: Path) -> CheckResult:
    where = shown(render_dir / "http" / (t.rel or ""))
    how = "`upi ignition -o DIR`" if t.ignition else "`upi images`, or copy it there"
    return CheckResult(AREA, f"sha256 of {t.what}", "as staged", "not staged", "warn",
                       f"{where} does not exist: nothing to compare {t.url} with; stage it ({how})")


def _probe(t: Target, inv: Inventory, now: datetime, timeout: float, retries: int,
           deep: Path | None) -> list[CheckResult]:
    local = staged(deep, t.rel) if deep is not None and t.rel is not None else None
    hashing = local is not None and not local.error
    read = IGNITION_LIMIT + 1 if t.ignition else (local.size + 1 if local and hashing else 1)
    deadline = timeout + (local.size / DEEP_BYTES_PER_SECOND if local and hashing else 0)
    f = fetch(t.url, timeout=timeout, retries=retries, deadline=deadline,
              keep=IGNITION_LIMIT if t.ignition else 1, read=read, digest=hashing)
    rows = _ignition(t, f, now, inv) if t.ignition else [_artifact(t, f, inv)]
    if deep is not None and t.rel is not None:
        rows.append(_compare(t, f, local) if local is not None else _not_staged(t, deep))
    return rows


def check_http(inv: Inventory, *, server: str | None = None, port: int | None = None,
               timeout: float = 5.0, retries: int = 1, workers: int = 8,
               now: datetime | None = None, deep: Path | None = None,
               render_dir: Path | None = None) -> list[CheckResult]:
    """Fetch every artifact and ignition URL (from `server`/`port` when given).

    With `deep` (a render directory), files staged under its http/ are compared
    by sha256 with what the server sends, read to the end. Then each file
    upi placed there that the render no longer has must be gone
    (upi.check.stale; judged by the http/ of `render_dir`, or `deep`, when given).
    """
    now = now or datetime.now(UTC)
    base = inv.provisioner.http_base_url
    todo = [Target(t.what, redirect(t.url, base, server, port), t.ignition, t.rel)
            for t in targets(inv)]
    from upi.check.stale import check_stale_http

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = pool.map(lambda t: _probe(t, inv, now, timeout, retries, deep), todo)
        found = [row for group in rows for row in group]
    # Each file `upi push` recorded placing that the render no longer has must be gone.
    root = redirect(base.rstrip("/") + "/", base, server, port)
    return found + check_stale_http(inv, root, timeout=timeout, retries=retries,
                                    render_dir=render_dir or deep)
