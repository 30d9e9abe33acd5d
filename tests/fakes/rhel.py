"""FAKE RHEL 9 admin tools for provisioner/prepare.sh: dnf, rpm, systemctl, nmcli, semanage, selinuxenabled.

None of these can act on this Debian test host. Each fake is this program run
under the tool's name (argv[1]); it appends its command line to $FAKE_RHEL_LOG
(shell-quoted, one line) and keeps the host's state in $FAKE_RHEL_STATE/state.json,
so a query after a change sees it, as on a real host. Where each behaviour comes from:

- dnf: `dnf install -y PKG...`; an unknown name fails as dnf 4 does: "No match for
  argument: X" on stdout, "Error: Unable to find a match: X" on stderr, exit 1 (dnf 4 output
  quoted in kubernetes-sigs/kubespray#4802 and fastfetch-cli/fastfetch#1057).
  AVAILABLE lists the RHEL 9 BaseOS/AppStream names prepare.sh may ask for.
- rpm: `rpm -q --quiet PKG...`: exit status = the number of packages not installed (rpm(8)).
- systemctl: `is-enabled --quiet`, `is-active --quiet` (exit 0 or 1, systemctl(1));
  `enable [--now]`, `start`, `restart`. A unit whose package is not installed fails as
  systemd does ("Failed to enable unit: Unit file X does not exist.", exit 1). UNITS maps a
  unit to its package (RHEL 9: virtqemud.socket ships in libvirt-daemon-driver-qemu, which
  the `libvirt` package pulls in: simplified to `libvirt`).
- nmcli: `-g FIELDS connection show ID`, `-g FIELDS device show DEV`, `connection add`,
  `connection modify`, `connection up`, following nmcli(1) and nm-settings-nmcli(5): a
  missing profile or device exits 10 ("Error: ID - no such connection profile.",
  "Error: Device 'X' not found.": NetworkManager clients/cli, NMC_RESULT_ERROR_NOT_FOUND); `add`
  takes `type con-name ifname master slave-type` as aliases of connection.*; a property
  the fake does not know fails ("Error: invalid or not allowed setting"). Activating a
  bridge with connection.autoconnect-slaves=1 activates its ports, each taking its device
  over from the profile active there (one device, one active profile). IP4.ADDRESS[1] of
  a device is the ipv4.addresses of its active profile. Unlike the real nmcli, `add` with a
  con-name that exists fails: the real one would add a second profile of that name, which
  prepare.sh must never do.
- semanage: `port -l` prints "SELinux Port Type / Proto / Port Number" columns, ports
  joined by ", " (python/semanage/seobject.py portRecords.list); `port -a` on a port the
  policy or a local rule defines fails "ValueError: Port tcp/8080 already defined", `port -m`
  on one nobody defines fails "ValueError: Port tcp/X is not defined" (seobject.py
  portRecords.__add/__modify). POLICY is RHEL's selinux-policy for the http types
  (policy/modules/kernel/corenetwork.te.in network_port(http, ...), (http_cache, ...)).
- selinuxenabled: exit 0 when the state says SELinux is on (selinuxenabled(8)).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

AVAILABLE = {"dnsmasq", "httpd", "haproxy", "policycoreutils-python-utils", "firewalld", "libvirt",
             "qemu-kvm", "virt-install", "edk2-ovmf", "nginx", "NetworkManager"}
UNITS = {"firewalld.service": "firewalld", "httpd.service": "httpd", "dnsmasq.service": "dnsmasq",
         "haproxy.service": "haproxy", "virtqemud.socket": "libvirt", "virtstoraged.socket": "libvirt",
         "nginx.service": "nginx"}
POLICY = [("http_port_t", "tcp", "80"), ("http_port_t", "tcp", "81"), ("http_port_t", "tcp", "443"),
          ("http_port_t", "tcp", "488"), ("http_port_t", "tcp", "8008"), ("http_port_t", "tcp", "8009"),
          ("http_port_t", "tcp", "8443"), ("http_port_t", "tcp", "9000"),
          ("http_cache_port_t", "tcp", "3128"), ("http_cache_port_t", "tcp", "8080"),
          ("http_cache_port_t", "tcp", "8118"), ("http_cache_port_t", "tcp", "8123"),
          ("http_cache_port_t", "tcp", "10001-10010"), ("http_cache_port_t", "udp", "3130")]
ALIASES = {"type": "connection.type", "con-name": "connection.id", "ifname": "connection.interface-name",
           "master": "connection.master", "slave-type": "connection.slave-type",
           "autoconnect": "connection.autoconnect"}
PROPERTIES = {"connection.type", "connection.id", "connection.interface-name", "connection.master",
              "connection.slave-type", "connection.autoconnect", "connection.autoconnect-slaves",
              "bridge.stp", "ipv4.method", "ipv4.addresses", "ipv4.gateway", "ipv4.dns", "ipv6.method"}
TYPES = {"bridge": "bridge", "ethernet": "802-3-ethernet", "802-3-ethernet": "802-3-ethernet"}


def _fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(code)


class State:
    def __init__(self) -> None:
        self.path = Path(os.environ["FAKE_RHEL_STATE"]) / "state.json"
        self.data: dict[str, Any] = json.loads(self.path.read_text())

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))


def dnf(st: State, args: list[str]) -> None:
    if args[:1] != ["install"] or "-y" not in args:
        _fail(f"FAKE dnf: only `dnf install -y PKG...` is imitated, not {args}")
    pkgs = [a for a in args[1:] if not a.startswith("-")]
    unknown = [p for p in pkgs if p not in AVAILABLE]
    if unknown:
        print("\n".join(f"No match for argument: {p}" for p in unknown))
        _fail(f"Error: Unable to find a match: {' '.join(unknown)}")
    st.data["installed"] = sorted(set(st.data["installed"]) | set(pkgs))


def rpm(st: State, args: list[str]) -> None:
    if args[:2] != ["-q", "--quiet"]:
        _fail(f"FAKE rpm: only `rpm -q --quiet PKG...` is imitated, not {args}")
    raise SystemExit(sum(p not in st.data["installed"] for p in args[2:]))


def systemctl(st: State, args: list[str]) -> None:
    verb, rest = args[0], [a for a in args[1:] if not a.startswith("-")]
    units = st.data["units"]
    for unit in rest:
        if UNITS.get(unit) not in st.data["installed"]:
            if verb in ("is-enabled", "is-active"):
                raise SystemExit(1)
            _fail(f"Failed to {verb} unit: Unit file {unit} does not exist.")
        state = units.setdefault(unit, {"enabled": False, "active": False})
        if verb == "is-enabled":
            raise SystemExit(0 if state["enabled"] else 1)
        if verb == "is-active":
            raise SystemExit(0 if state["active"] else 1)
        if verb == "enable":
            state["enabled"] = True
            state["active"] = state["active"] or "--now" in args
        elif verb in ("start", "restart"):
            state["active"] = True
        else:
            _fail(f"FAKE systemctl: {verb} is not imitated")


def _props(pairs: list[str]) -> dict[str, str]:
    if len(pairs) % 2:
        _fail(f"Error: value for '{pairs[-1]}' is missing.", 2)
    out = {}
    for key, value in zip(pairs[::2], pairs[1::2], strict=True):
        key = ALIASES.get(key, key)
        if key not in PROPERTIES:
            _fail(f"Error: invalid or not allowed setting '{key}' (FAKE nmcli knows {sorted(PROPERTIES)})", 2)
        out[key] = TYPES.get(value, value) if key == "connection.type" else value
    return out


def _activate(nm: dict[str, Any], name: str) -> None:
    prof = nm["profiles"][name]
    dev = prof["connection.interface-name"]
    if prof["connection.type"] == "bridge":
        nm["devices"].setdefault(dev, {"type": "bridge", "connection": ""})
    elif dev not in nm["devices"]:
        _fail(f"Error: Connection activation failed: No suitable device found for this connection "
              f"(device {dev} not available).", 4)
    nm["devices"][dev]["connection"] = name
    master = prof.get("connection.master")
    if master and nm["devices"].get(master, {}).get("connection") != master:
        _activate(nm, master)
    if prof["connection.type"] == "bridge" and prof.get("connection.autoconnect-slaves") in ("1", "yes"):
        for port, p in nm["profiles"].items():
            if p.get("connection.master") in (name, dev) and nm["devices"].get(
                    p["connection.interface-name"], {}).get("connection") != port:
                _activate(nm, port)


def _show_connection(nm: dict[str, Any], fields: list[str], name: str) -> None:
    prof = nm["profiles"].get(name)
    if prof is None:
        _fail(f"Error: {name} - no such connection profile.", 10)
    active = any(d["connection"] == name for d in nm["devices"].values())
    defaults = {"ipv4.method": "auto", "connection.autoconnect": "yes"}
    for f in fields:
        print("activated" if f == "GENERAL.STATE" and active else prof.get(f, defaults.get(f, "")))


def _show_device(nm: dict[str, Any], fields: list[str], dev: str) -> None:
    d = nm["devices"].get(dev)
    if d is None:
        _fail(f"Error: Device '{dev}' not found.", 10)
    conn = nm["profiles"].get(d["connection"], {})
    values = {"GENERAL.TYPE": d["type"], "GENERAL.CONNECTION": d["connection"],
              "IP4.ADDRESS[1]": conn.get("ipv4.addresses", "")}
    for f in fields:
        print(values[f])


def nmcli(st: State, args: list[str]) -> None:
    nm = st.data["nm"]
    fields = []
    if args[:1] == ["-g"]:
        fields, args = args[1].split(","), args[2:]
    obj, verb, rest = args[0], args[1], args[2:]
    if (obj, verb) == ("connection", "show"):
        _show_connection(nm, fields, rest[0])
    elif (obj, verb) == ("device", "show"):
        _show_device(nm, fields, rest[0])
    elif (obj, verb) == ("connection", "add"):
        props = _props(rest)
        name = props.get("connection.id") or _fail("FAKE nmcli: add without con-name")
        if name in nm["profiles"]:
            _fail(f"FAKE nmcli: a profile named {name} exists; the real nmcli would add a second one")
        nm["profiles"][name] = props
    elif (obj, verb) == ("connection", "modify"):
        if rest[0] not in nm["profiles"]:
            _fail(f"Error: unknown connection '{rest[0]}'.", 10)
        nm["profiles"][rest[0]].update(_props(rest[1:]))
    elif (obj, verb) == ("connection", "up"):
        if rest[0] not in nm["profiles"]:
            _fail(f"Error: unknown connection '{rest[0]}'.", 10)
        _activate(nm, rest[0])
    else:
        _fail(f"FAKE nmcli: {obj} {verb} is not imitated")


def _covers(spec: str, port: int) -> bool:
    low, _, high = spec.partition("-")
    return int(low) <= port <= int(high or low)


def semanage(st: State, args: list[str]) -> None:
    if args[:2] == ["port", "-l"]:
        rows: dict[tuple[str, str], list[str]] = {}
        for t, proto, port in [*map(tuple, st.data["semanage"]), *POLICY]:  # local rules first
            rows.setdefault((t, proto), []).append(port)
        print(f"{'SELinux Port Type':<30} {'Proto':<8} Port Number\n")
        for (t, proto), ports in sorted(rows.items()):
            print(f"{t:<30} {proto:<8} {', '.join(ports)}")
        return
    if args[:1] != ["port"] or args[1] not in ("-a", "-m") or args[2] != "-t" or args[4] != "-p":
        _fail(f"FAKE semanage: only port -l, port -a/-m -t TYPE -p PROTO PORT are imitated, not {args}")
    mode, typ, proto, port = args[1], args[3], args[5], args[6]
    defined = any(p == proto and _covers(n, int(port))
                  for _, p, n in [*map(tuple, st.data["semanage"]), *POLICY])
    if mode == "-a" and defined:
        _fail(f"ValueError: Port {proto}/{port} already defined")
    if mode == "-m" and not defined:
        _fail(f"ValueError: Port {proto}/{port} is not defined")
    local = [r for r in st.data["semanage"] if r[1:] != [proto, port]]
    st.data["semanage"] = [*local, [typ, proto, port]]


def selinuxenabled(st: State, args: list[str]) -> None:
    raise SystemExit(0 if st.data["selinux"] else 1)


TOOLS = {"dnf": dnf, "rpm": rpm, "systemctl": systemctl, "nmcli": nmcli, "semanage": semanage,
         "selinuxenabled": selinuxenabled}


def main() -> None:
    tool, args = sys.argv[1], sys.argv[2:]
    with open(os.environ["FAKE_RHEL_LOG"], "a") as log:
        log.write(shlex.join([tool, *args]) + "\n")
    st = State()
    try:
        TOOLS[tool](st, args)
    finally:
        st.save()


if __name__ == "__main__":
    main()
