"""Redfish peers for the BMC tests: the real sushy-tools emulator, and a fake of the DGX (AMI) BMC.

The emulator (fake driver, loopback, a state directory per test, HTTPS with
a test CA, bcrypt basic auth) is the real Redfish server. It has no settings
object and no ETags, so `AmiFake` models what DGX BMCs do there
(reference/redfish.md): the system advertises `@Redfish.Settings` ->
`<system>/SD`; both carry ETags; a PATCH to SD without the current ETag as
If-Match is answered 204 and dropped; a reset applies what SD holds. It is a
fake, named so; it speaks Redfish JSON over TLS with basic auth.

Switches model DGX firmware as it is in the field (issue 24), each after a source:
- `etag_in`: where the ETags are: the `ETag` header (default), only the body's
  `@odata.etag` (DSP0266 1.8.1 9.5.3: a resource may carry its ETag in the
  body), or nowhere;
- `require_if_match`: a PATCH without If-Match is answered 428 with
  `Ami.1.0.PreconditionHeaderMissing` (the AMI registry in
  ocp-hm-openbmc-opf-ami/bmcweb redfish-core/include/registries/ami_message_registry.hpp;
  the DMTF Base registry's id for 428 is `PreconditionRequired`); `If-Match: *`
  matches any current representation (RFC 7232 3.1);
- `future_state`: a Boot PATCH on the system itself is answered 400
  `Ami.1.0.OperationSupportedInFutureStateURI` (same registry: the operation
  is supported only at the settings, "future state", URI, `<system>/SD`);
- `pending_only`: SD lists only the pending keys, not the current ones.
The system links its SecureBoot resource (DMTF SecureBoot.v1_1_0 schema:
`SecureBootEnable` writable, `SecureBootCurrentBoot` Enabled/Disabled during
this boot and unchanged until the system resets, `SecureBootMode`); it has an
ETag, a PATCH with a stale If-Match is answered 412 (DSP0266 / RFC 7232 3.1),
and a reset makes the current boot follow `SecureBootEnable`. Its switches:
`secure_boot_link` (False: the system links no SecureBoot, as BMCs without
the resource), `secure_boot_drop` (a PATCH is answered 204 and not kept) and
`secure_boot_patch_error` (status, MessageId, Message for a refused PATCH).
`elsewhere` makes it hostile: link kind -> a prefix put before that link's
path (another server's origin), for the tests that no link leads away.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import bcrypt
import yaml
from certs import Issued, TlsHttpServer, issue, make_ca

USER, PASSWORD = "admin", "s3cret-bmc-pw"
RESET_TYPES = ["On", "ForceOff", "ForceRestart", "GracefulShutdown"]


@dataclass(frozen=True)
class Tls:
    """A test CA and a server certificate for 127.0.0.1, on disk."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_tls(workdir: Path, name: str = "bmc") -> Tls:
    ca = make_ca(f"{name}-test-ca")
    leaf: Issued = issue(ca, "127.0.0.1", server=True)
    workdir.mkdir(parents=True, exist_ok=True)
    paths = Tls(workdir / f"{name}-ca.pem", workdir / f"{name}.crt", workdir / f"{name}.key")
    paths.ca_file.write_bytes(ca.cert_pem)
    paths.cert_file.write_bytes(leaf.cert_pem)
    paths.key_file.write_bytes(leaf.key_pem)
    return paths


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_system(uuid: str, name: str, *, power: str = "Off", secure_boot: bool = False) -> dict[str, Any]:
    return {"uuid": uuid, "name": name, "power_state": power, "secure_boot": secure_boot,
            "boot_mode": "UEFI", "nics": [{"mac": "b8:ce:f6:10:33:44", "ip": "127.0.0.2"}]}


class Emulator:
    """`sushy-emulator --fake` on a loopback port, HTTPS, basic auth, its own state directory."""

    def __init__(self, workdir: Path, systems: list[dict[str, Any]], tls: Tls) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.tls = tls
        auth = workdir / "htpasswd"
        auth.write_bytes(USER.encode() + b":" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)) + b"\n")
        conf = workdir / "emulator.conf"
        conf.write_text(
            f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {self.port}\n"
            f"SUSHY_EMULATOR_SSL_CERT = {str(tls.cert_file)!r}\n"
            f"SUSHY_EMULATOR_SSL_KEY = {str(tls.key_file)!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(auth)!r}\n"
            f"SUSHY_EMULATOR_STATE_DIR = {str(workdir / 'state')!r}\n"
            "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n")
        self.log = (workdir / "emulator.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sushy_tools.emulator.main", "--config", str(conf), "--fake"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited: {(self.workdir / 'emulator.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("sushy-emulator did not listen within 30 s")

    def get(self, path: str) -> dict[str, Any]:
        """GET a path with the test credentials (what the emulator really holds)."""
        import requests

        r = requests.get(self.url + path, auth=(USER, PASSWORD), verify=str(self.tls.ca_file), timeout=10)
        r.raise_for_status()
        return dict(r.json())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


@dataclass
class AmiState:
    """What the DGX fake holds: the system's own state and the pending settings object."""

    power: str = "Off"
    boot: dict[str, Any] = field(default_factory=lambda: {
        "BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
        "BootSourceOverrideMode": "UEFI"})
    pending: dict[str, Any] = field(default_factory=dict)
    etag: int = 1
    sd_etag: int = 7
    secure_boot: bool = False
    secure_boot_current: bool | None = None  # SecureBootCurrentBoot; None: as secure_boot
    secure_boot_etag: int = 3
    secure_boot_link: bool = True
    secure_boot_drop: bool = False
    secure_boot_patch_error: tuple[int, str, str] | None = None
    # Every PATCH seen: (path, If-Match, body, kept).
    patches: list[tuple[str, str | None, dict[str, Any], bool]] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    fail_status: int | None = None  # answer every authenticated request with this code
    systems: tuple[str, ...] = ("Self",)
    etag_in: str = "header"  # "header", "body" (@odata.etag only) or "none"
    require_if_match: bool = False  # 428 PreconditionHeaderMissing for a PATCH without If-Match
    future_state: bool = False  # 400 OperationSupportedInFutureStateURI for Boot PATCHed on the system
    pending_only: bool = False  # SD lists only the pending keys
    sd_patch_error: tuple[int, str, str] | None = None  # (status, MessageId, Message) for PATCH SD
    # Link kind (systems, member, settings, secure_boot, reset_target, action_info, redirect)
    # -> the prefix that link gets instead of none (its path follows).
    elsewhere: dict[str, str] = field(default_factory=dict)
    # Every request seen: (method, path, the Authorization header or None).
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _AmiHandler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    @property
    def st(self) -> AmiState:
        return self.server.fake  # type: ignore[no-any-return]

    def _send(self, code: int, doc: dict[str, Any] | None = None, etag: str | None = None,
              location: str | None = None) -> None:
        if etag and doc is not None and self.st.etag_in == "body":
            doc = {**doc, "@odata.etag": etag}
        body = json.dumps(doc).encode() if doc is not None else b""
        self.send_response(code)
        if doc is not None:
            self.send_header("Content-Type", "application/json")
        if etag and self.st.etag_in == "header":
            self.send_header("ETag", etag)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _link(self, kind: str, path: str) -> str:
        return self.st.elsewhere.get(kind, "") + path

    def _error(self, code: int, message_id: str, message: str, *args: str) -> None:
        # DSP0266 8.6 error response: code, message, @Message.ExtendedInfo.
        self._send(code, {"error": {"code": message_id, "message": message, "@Message.ExtendedInfo": [
            {"MessageId": message_id, "Message": message, "MessageArgs": list(args),
             "Severity": "Critical"}]}})

    def _authorized(self) -> bool:
        with self.st.lock:
            self.st.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.path.rstrip("/") in ("/redfish/v1", "/redfish"):
            return True
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self._send(401, {"error": {"code": "Base.1.0.NoValidSession", "message": "Unauthorized"}})
            return False
        if self.st.fail_status:
            self._send(self.st.fail_status, {"error": {"code": "Base.1.0.InternalError",
                                                       "message": "The BMC web server is busy"}})
            return False
        return True

    def _system(self, sid: str) -> dict[str, Any]:
        st = self.st
        base = f"/redfish/v1/Systems/{sid}"
        return {
            "@odata.id": base, "@odata.type": "#ComputerSystem.v1_5_0.ComputerSystem", "Id": sid,
            "Name": "DGX", "PowerState": st.power,
            "Boot": {**st.boot, "BootSourceOverrideTarget@Redfish.AllowableValues":
                     ["None", "Pxe", "Hdd", "Cd", "UefiHttp", "BiosSetup"]},
            "@Redfish.Settings": {"@odata.type": "#Settings.v1_2_0.Settings",
                                  "SettingsObject": {"@odata.id": self._link("settings", f"{base}/SD")}},
            **({"SecureBoot": {"@odata.id": self._link("secure_boot", f"{base}/SecureBoot")}}
               if st.secure_boot_link else {}),
            "Actions": {"#ComputerSystem.Reset": {
                "target": self._link("reset_target", f"{base}/Actions/ComputerSystem.Reset"),
                **({"@Redfish.ActionInfo": self._link("action_info", f"{base}/ResetActionInfo")}
                   if "action_info" in st.elsewhere else
                   {"ResetType@Redfish.AllowableValues": RESET_TYPES})}},
        }

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._authorized():
            return
        st = self.st
        path = self.path.rstrip("/")
        with st.lock:
            if path == "/redfish/v1":
                self._send(200, {"@odata.id": "/redfish/v1", "Id": "RootService", "RedfishVersion": "1.7.0",
                                 "Systems": {"@odata.id": self._link("systems", "/redfish/v1/Systems")}})
            elif path == "/redfish/v1/Systems":
                self._send(200, {"@odata.id": path, "Members@odata.count": len(st.systems),
                                 "Members": [{"@odata.id": self._link("member", f"{path}/{s}")}
                                             for s in st.systems]})
            elif path.count("/") == 4 and path.rsplit("/", 1)[1] in st.systems:
                if "redirect" in st.elsewhere:
                    self._send(307, {}, location=self._link("redirect", path))
                    return
                self._send(200, self._system(path.rsplit("/", 1)[1]), etag=f'W/"{st.etag}"')
            elif path.endswith("/SD"):
                boot = dict(st.pending) if st.pending_only else {**st.boot, **st.pending}
                self._send(200, {"@odata.id": path, "Boot": boot}, etag=f'"{st.sd_etag}"')
            elif path.endswith("/ResetActionInfo"):
                self._send(200, {"@odata.id": path, "Id": "ResetActionInfo", "Parameters": [
                    {"Name": "ResetType", "Required": True, "DataType": "String",
                     "AllowableValues": RESET_TYPES}]})
            elif path.endswith("/SecureBoot"):
                current = st.secure_boot if st.secure_boot_current is None else st.secure_boot_current
                self._send(200, {"@odata.id": path, "@odata.type": "#SecureBoot.v1_1_0.SecureBoot",
                                 "Id": "SecureBoot", "SecureBootEnable": st.secure_boot,
                                 "SecureBootCurrentBoot": "Enabled" if current else "Disabled",
                                 "SecureBootMode": "UserMode"}, etag=f'"{st.secure_boot_etag}"')
            else:
                self._send(404, {"error": {"code": "Base.1.0.ResourceMissingAtURI", "message": path}})

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        return dict(json.loads(self.rfile.read(n) or b"{}"))

    def do_PATCH(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        st = self.st
        body = self._body()
        match = self.headers.get("If-Match")
        if st.require_if_match and match is None:
            with st.lock:
                st.patches.append((self.path, match, body, False))
            self._error(428, "Ami.1.0.PreconditionHeaderMissing", "The request did not provide the "
                        "required precondition, such as an If-Match or If-None-Match header.")
            return
        if self.path.rstrip("/").endswith("/SecureBoot"):
            self._patch_secure_boot(body, match)
            return
        on_sd = self.path.endswith("/SD")
        if on_sd and st.sd_patch_error:
            code, message_id, message = st.sd_patch_error
            self._error(code, message_id, message)
            return
        if not on_sd and st.future_state and "Boot" in body:
            with st.lock:
                st.patches.append((self.path, match, body, False))
            self._error(400, "Ami.1.0.OperationSupportedInFutureStateURI",
                        f"Support of this Operation for Boot Properties is moved to FutureState "
                        f"URI({self.path.rstrip('/')}/SD)", "Boot", f"{self.path.rstrip('/')}/SD")
            return
        with st.lock:
            if on_sd:
                kept = match in (f'"{st.sd_etag}"', "*")
                if kept:  # AMI: only a PATCH carrying the current ETag is stored
                    st.pending.update(body.get("Boot", {}))
                    st.sd_etag += 1
            else:
                kept = False  # boot settings on the system itself are not honoured by this firmware
            st.patches.append((self.path, match, body, kept))
        self._send(204)

    def _patch_secure_boot(self, body: dict[str, Any], match: str | None) -> None:
        st = self.st
        if st.secure_boot_patch_error:
            self._error(*st.secure_boot_patch_error)
            return
        with st.lock:
            if match not in (None, "*", f'"{st.secure_boot_etag}"'):
                st.patches.append((self.path, match, body, False))
                self._error(412, "Base.1.0.PreconditionFailed", "The ETag supplied did not match "
                            "the ETag required to change this resource.")
                return
            value = body.get("SecureBootEnable")
            kept = isinstance(value, bool) and not st.secure_boot_drop
            if kept:
                if st.secure_boot_current is None:
                    st.secure_boot_current = st.secure_boot  # this boot keeps what it started with
                st.secure_boot = bool(value)
                st.secure_boot_etag += 1
            st.patches.append((self.path, match, body, kept))
        self._send(204)

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        st = self.st
        kind = self._body().get("ResetType", "")
        with st.lock:
            st.resets.append(kind)
            if kind in ("On", "ForceRestart"):
                st.secure_boot_current = None  # the new boot runs with SecureBootEnable
                st.power = "On"
                st.boot.update(st.pending)  # pending settings apply at the reset
                st.pending.clear()
                st.etag += 1
            elif kind == "ForceOff":
                st.power = "Off"
        self._send(204)


class AmiFake:
    """The DGX BMC fake on a loopback HTTPS port."""

    def __init__(self, tls: Tls, state: AmiState | None = None) -> None:
        self.state = state or AmiState()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
        self.httpd = TlsHttpServer(("127.0.0.1", 0), _AmiHandler)
        self.httpd.daemon_threads = True
        # The TLS handshake runs in each connection's thread (its first read), not in accept():
        # a client that connects and never speaks cannot stall the accept loop, nor shutdown().
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                               do_handshake_on_connect=False)
        self.httpd.fake = self.state  # type: ignore[attr-defined]
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        # shutdown() waits for the serving loop to see its flag: a loop that has ended (its thread
        # gone) would hold the teardown forever instead of letting the test's own failure show.
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()


class Silent:
    """A TCP listener that accepts and never answers: an unreachable BMC, on loopback."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"https://127.0.0.1:{self.sock.getsockname()[1]}"

    def stop(self) -> None:
        self.sock.close()


def write_credentials(path: Path, *, user: str = USER, password: str = PASSWORD, mode: int = 0o600) -> Path:
    path.write_text(yaml.safe_dump({"username": user, "password": password}))
    path.chmod(mode)
    return path


def inventory_with_bmcs(src: Path, bmcs: dict[str, dict[str, Any]]) -> Path:
    """The example inventory at `src` with `bmcs` (node name -> bmc section) added; written beside it."""
    doc = yaml.safe_load(src.read_text())
    for node in doc["nodes"]:
        if node["name"] in bmcs:
            node["bmc"] = bmcs[node["name"]]
    out = src.with_name("metal.yaml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def pushed_site_with_bmc(runner: Any, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake) -> Any:
    """A local push site (pushkit) whose worker-0 has the DGX fake as its BMC; pushed once.

    worker-1 keeps no BMC: a node booted by hand, whose PXE file is still flipped when it joins.
    """
    from conftest import require
    from pushkit import make_site

    from upi.cli import app

    require("dnsmasq")
    require("haproxy")
    site = make_site(tmp_path, example_dir, runner, {"local": True})
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    site.inventory.write_text(site.inventory.read_text().replace(
        "  mac: b8:ce:f6:10:33:44\n",
        f"  mac: b8:ce:f6:10:33:44\n  bmc: {{address: '{ami.url}', credentials_file: {creds.name}, "
        f"verify_tls: '{tls.ca_file}', timeout: 5.0}}\n"))
    assert runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    return site
