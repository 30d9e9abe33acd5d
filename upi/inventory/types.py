"""Reusable validated scalar types for the inventory model.

Every string that reaches a rendered file is one of these types, and each
refuses the characters that would let a value start a new line or a new
directive in that file (docs/security.md, "Hostile inventory values"):
no value is ever escaped into a config it was not meant to change.
Patterns are matched with `fullmatch` (a `$` also matches before a final
newline) and digits are ASCII only (Python's regex digits and `int()` take any script's).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from pydantic import AfterValidator, BeforeValidator, Strict, WithJsonSchema

from upi.redact import has_userinfo, hide_userinfo

_MAC = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_DOMAIN_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE)
_IPV4 = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")
_CIDR = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}(/[0-9]{1,2})?")
# Longest DNS name (RFC 1035: 255 octets on the wire, 253 characters written).
MAX_FQDN = 253

# What a boot artifact path or URL may hold: it is written unquoted into GRUB
# (`linux`, `initrd`), pxelinux (`KERNEL`, `APPEND`) and the kernel command
# line, where whitespace separates arguments, `;` `|` `&` end a GRUB command,
# `$` expands a variable and quotes or braces open a word or a block.
_ARTIFACT = re.compile(r"[A-Za-z0-9._~/%+=:@-]+")
# One kernel argument: the same, plus `,` (console=ttyS0,115200n8, bond=...).
_KERNEL_ARG = re.compile(r"[A-Za-z0-9._~/%+=:@,-]+")
# Arguments upi writes itself from the inventory: a second one would win or fight.
OWN_KERNEL_ARGS = ("coreos.inst.ignition_url", "coreos.inst.install_dev", "coreos.live.rootfs_url",
                   "coreos.inst.image_url", "coreos.inst", "initrd", "BOOT_IMAGE")
# A Redfish resource id: one URL path segment (AMI uses `Self`, others a UUID or a serial).
_REDFISH_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")
# A BMC address's host and port: a name, an IPv4 address or a bracketed IPv6 one, then :PORT.
_BMC_NETLOC = re.compile(r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
# A block device: /dev/sda, /dev/nvme0n1, /dev/disk/by-path/pci-0000:00:1f.2-ata-1.
_DEVICE = re.compile(r"/dev/[A-Za-z0-9._:+@-]+(/[A-Za-z0-9._:+@-]+)*")
# Characters refused in any path: `,` is a sub-option separator in dnsmasq
# (tftp-root=DIR,IFACE) and virt-install (--disk path=...,size=); `"` and `\`
# quote and escape in dnsmasq; `#` starts a comment.
_PATH_REFUSED = frozenset(',"\\#')
# libvirt transports that never run a command named by the URI (`ext` does,
# `?command=`; ssh's `netcat=`/`socket=` choose a remote one; `no_verify`
# skips the host key check): the test driver is allowed for tests and demos.
HYPERVISOR_DRIVERS = ("qemu", "test")
HYPERVISOR_TRANSPORTS = ("", "unix", "ssh", "libssh", "libssh2", "tls")
HYPERVISOR_QUERY_KEYS = ("keyfile", "known_hosts", "mode")


def _shown(value: object) -> str:
    """A value as an error shows it: a short repr of a string, else only its type.

    Never the repr of a list or mapping: behind YAML aliases it can hold billions of items.
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
    return f"a {type(value).__name__}" if isinstance(value, list | dict) else repr(value)


shown = _shown  # for the rules modules: a value as an error may show it


def _fullmatch(pattern: re.Pattern[str], value: str) -> bool:
    return value.isascii() and pattern.fullmatch(value) is not None


def _mac(value: str) -> str:
    mac = value.strip().lower().replace("-", ":")
    if not _fullmatch(_MAC, mac):
        raise ValueError(f"{_shown(value)} is not a MAC address (want six hex pairs, 52:54:00:aa:bb:cc)")
    if int(mac[:2], 16) & 1:
        raise ValueError(f"{_shown(value)} is a multicast MAC address; a NIC has a unicast one")
    if mac == "00:00:00:00:00:00":
        raise ValueError(f"{_shown(value)} is the all-zeros MAC address; a NIC has a real one")
    return mac


def _label(value: str) -> str:
    if not _fullmatch(_LABEL, value):
        raise ValueError(
            f"{_shown(value)} is not a DNS label (lowercase letters, digits and hyphens, "
            "1-63 characters, no hyphen at either end)"
        )
    return value


def _cluster_name(value: str) -> str:
    # 55-63 characters is a DNS label the installer refuses: installer_rules says so, beside
    # the FQDN rules. Past 63 it is no label at all; say both limits.
    if len(value) > 63 and _fullmatch(re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"), value):
        raise ValueError(
            f"{_shown(value)} has {len(value)} characters; a DNS label has at most 63 and the "
            "installer takes at most 54 (openshift-install: metadata.name: must be no more than "
            "54 characters)"
        )
    return _label(value)


def _domain(value: str) -> str:
    name = value.removesuffix(".")
    parts = name.split(".")
    if len(name) > MAX_FQDN or not all(_fullmatch(_DOMAIN_LABEL, p) for p in parts):
        raise ValueError(f"{_shown(value)} is not a DNS domain name")
    return name.lower()


def _stringify(value: object) -> object:
    # YAML reads `openshift_version: 4.10` as the float 4.1: refuse, don't guess.
    if isinstance(value, float):
        raise ValueError(f"{_shown(value)} is a number, not a version: YAML drops trailing zeros "
                         "(4.20 is read as 4.2); write the version in quotes")
    return value


def _version(value: str) -> str:
    m = re.fullmatch(r"4\.([0-9]+)(\.[0-9]+)?", value.strip(), re.ASCII)
    if not m or not 1 <= int(m.group(1)) <= 99:
        raise ValueError(f"{_shown(value)} is not an OpenShift 4 version (write \"4.16\" or \"4.16.3\")")
    return value.strip()


class Address(ipaddress.IPv4Address):
    """An IPv4 address that keeps its text: a render writes each node's 6-8 times.

    (40,000 str() calls for 5,000 nodes, each formatting four octets anew.)
    """

    __slots__ = ("_text",)

    def __str__(self) -> str:
        try:
            return self._text
        except AttributeError:
            self._text: str = super().__str__()
            return self._text

    def __repr__(self) -> str:
        return f"IPv4Address({str(self)!r})"  # as the addresses it stands for print


def _ipv4(value: object) -> ipaddress.IPv4Address:
    if isinstance(value, ipaddress.IPv4Address):
        return value
    if isinstance(value, str) and _fullmatch(_IPV4, value):
        try:
            return Address(value)
        except ValueError:
            pass
    raise ValueError(f"{_shown(value)} is not an IPv4 address")


def _net(value: object) -> ipaddress.IPv4Network:
    if isinstance(value, ipaddress.IPv4Network):
        return value
    if not isinstance(value, str) or not _fullmatch(_CIDR, value):
        raise ValueError(f"{_shown(value)} is not an IPv4 network in CIDR form (write 10.0.0.0/24)")
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            net = ipaddress.IPv4Network(value, strict=False)
            raise ValueError(
                f"{_shown(value)} has host bits set: the network is {net} (openshift-install: "
                f"invalid network address. got {value}, expecting {net})"
            ) from None
        raise ValueError(f"{_shown(value)} is not an IPv4 network in CIDR form ({exc})") from None


def _url_parts(value: str, what: str) -> tuple[str, str]:
    """(scheme, path) of an http(s) URL that is safe to write into a config file."""
    shown = _shown(hide_userinfo(value))  # a message never shows a password the URL holds
    if has_userinfo(value):
        raise ValueError(
            f"{shown}: a user or password in the URL would be copied into world-readable "
            "boot files and logs; serve the files without credentials"
        )
    if not _fullmatch(_ARTIFACT, value):
        raise ValueError(
            f"{shown} is not {what}: only letters, digits and . _ ~ / % + = : @ - "
            "(no spaces, quotes, ; & $ ? # or line breaks: it is written into boot files)"
        )
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError as exc:
        raise ValueError(f"{shown} is not {what} ({hide_userinfo(str(exc))})") from None
    if url.scheme not in ("http", "https") or not url.hostname or "@" in url.netloc:
        raise ValueError(f"{shown} is not {what} (want http://HOST[:PORT]/...)")
    if port == 0:
        raise ValueError(f"{shown} is not {what} (port 0)")
    return url.scheme, url.path


def _http_url(value: str) -> str:
    _url_parts(value, "an http:// or https:// URL")
    return value.rstrip("/")


def _redfish_url(value: str) -> str:
    # Its own rules, not a boot-file URL's: the address goes into no file, only to requests.
    shown = _shown(hide_userinfo(value))
    want = "write https://HOST or https://HOST:PORT, HOST a name or an IP address ([IPv6])"
    if has_userinfo(value):
        raise ValueError(f"{shown}: a user or password in the URL is refused (messages and logs "
                         "name the BMC by its address); put them in bmc.credentials_file")
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError:
        raise ValueError(f"{shown} is not a BMC address ({want})") from None
    if url.scheme == "http":
        raise ValueError(f"{shown}: a BMC is reached over https:// only (its password travels "
                         "with every request)")
    if url.scheme != "https" or not value.isascii() or not _BMC_NETLOC.fullmatch(url.netloc):
        raise ValueError(f"{shown} is not a BMC address ({want})")
    if port == 0:
        raise ValueError(f"{shown} is not a BMC address (port 0; {want})")
    if url.path.strip("/") or url.query or url.fragment or "?" in value or "#" in value:
        raise ValueError(f"{shown}: name the BMC only (https://HOST[:PORT]); upi finds "
                         "/redfish/v1 itself")
    return value.rstrip("/")


def _redfish_id(value: str) -> str:
    if not _fullmatch(_REDFISH_ID, value):
        raise ValueError(f"{_shown(value)} is not a Redfish system id (letters, digits and . _ ~ -, "
                         "as in /redfish/v1/Systems/<id>)")
    return value


def _artifact(value: str) -> str:
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", value):
        _, path = _url_parts(value, "an http:// or https:// URL or a path under http_base_url")
        if not path.rsplit("/", 1)[-1]:
            raise ValueError(f"{_shown(value)} names no file (the URL ends in /)")
    elif not _fullmatch(_ARTIFACT, value) or ".." in value.split("/"):
        raise ValueError(
            f"{_shown(value)} is not a path under http_base_url: only letters, digits and "
            ". _ ~ / % + = : @ - (no spaces, quotes, ; & $ ? # .. or line breaks: it is "
            "written into boot files)"
        )
    elif value.endswith("/") or value.split("/")[-1] in ("", "."):
        # `/` or `rhcos/` would leave KERNEL/initrd with no file, and nothing for `upi images` to stage.
        raise ValueError(f"{_shown(value)} names no file (the path ends in /)")
    return value


def _abs_path(value: str) -> str:
    bad = sorted({c for c in value if c in _PATH_REFUSED or c.isspace() or not c.isprintable()})
    if not value.startswith("/") or bad:
        why = f" (refused: {''.join(bad)!r})" if bad else ""
        raise ValueError(
            f"{_shown(value)} is not an absolute path without spaces, line breaks or , \" \\ #{why}"
        )
    return value


def _device(value: str) -> str:
    if not _fullmatch(_DEVICE, value) or ".." in value.split("/"):
        raise ValueError(
            f"{_shown(value)} is not a disk device (/dev/sda, /dev/nvme0n1, /dev/disk/by-id/...; "
            "letters, digits and . _ : + @ - only: it is written into the kernel command line)"
        )
    return value


def _kernel_arg(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{_shown(value)} must be one argument, no spaces")
    if not _fullmatch(_KERNEL_ARG, value):
        raise ValueError(
            f"{_shown(value)} is not a plain kernel argument: only letters, digits and "
            ". _ ~ / % + = : @ , - (no quotes, ; & $ {{ }} or line breaks: GRUB and pxelinux "
            "would read them as commands)"
        )
    key = value.split("=", 1)[0]
    if key in OWN_KERNEL_ARGS:
        raise ValueError(f"{_shown(value)}: upi sets {key} itself from the inventory; remove it here")
    return value


def _hypervisor_uri(value: str) -> str:
    m = re.fullmatch(r"([a-z0-9]+)(?:\+([a-z0-9]+))?://"  # driver+transport://
                     r"((?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]{1,5})?)?"  # [user@]host
                     r"(/[A-Za-z0-9._/+-]*)?(?:\?([A-Za-z0-9._/=&+-]*))?", value)
    allowed = (f"{' or '.join(HYPERVISOR_DRIVERS)} with transport "
               f"{', '.join(t or '(none)' for t in HYPERVISOR_TRANSPORTS)}")
    if not value.isascii() or not value.isprintable() or m is None:
        raise ValueError(f"{_shown(value)} is not a libvirt URI (qemu:///system, qemu+ssh://root@kvm1/system)")
    driver, transport, _, _, query = m.groups()
    if driver not in HYPERVISOR_DRIVERS or (transport or "") not in HYPERVISOR_TRANSPORTS:
        raise ValueError(f"{_shown(value)}: only {allowed} are allowed (ext and tcp run or expose more)")
    for key, _ in parse_qsl(query or "", keep_blank_values=True):
        if key not in HYPERVISOR_QUERY_KEYS:
            raise ValueError(
                f"{_shown(value)}: the URI parameter {key!r} is refused (allowed: "
                f"{', '.join(HYPERVISOR_QUERY_KEYS)}); command, netcat, socket and no_verify "
                "would run a program or skip the host key check"
            )
    return value


# Each type also carries its JSON Schema (`upi schema`): a pattern an editor can check
# as the admin types. The validators above stay the judge; a pattern never refuses
# what they accept.
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4_PATTERN = rf"^({_OCTET}\.){{3}}{_OCTET}$"
_LABEL_RE = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_SAFE_CHARS = "A-Za-z0-9._~/%+=:@-"


def _schema(pattern: str, description: str, **extra: object) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "pattern": pattern, "description": description, **extra})


MacAddress = Annotated[str, AfterValidator(_mac), _schema(
    r"^\s*[0-9A-Fa-f][02468aceACE]([:-][0-9A-Fa-f]{2}){5}\s*$",
    "A unicast MAC address, 52:54:00:aa:bb:cc (dashes and upper case are normalised)")]
DnsLabel = Annotated[str, AfterValidator(_label), _schema(
    "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "A DNS label: lowercase letters, digits and hyphens, 1-63 characters, no hyphen at either end")]
ClusterName = Annotated[str, AfterValidator(_cluster_name), _schema(
    "^[a-z0-9]([a-z0-9-]{0,52}[a-z0-9])?$",
    "A DNS label of at most 54 characters (the installer's limit): lowercase letters, digits, hyphens")]
DomainName = Annotated[str, AfterValidator(_domain), _schema(
    rf"^({_LABEL_RE}\.)*{_LABEL_RE}\.?$", "A DNS domain name (example.com)", maxLength=MAX_FQDN + 1)]
OpenShiftVersion = Annotated[str, BeforeValidator(_stringify), AfterValidator(_version), _schema(
    r"^\s*4\.[0-9]+(\.[0-9]+)?\s*$", 'An OpenShift 4 version in quotes: "4.16" or "4.16.3"')]
IPv4 = Annotated[ipaddress.IPv4Address, BeforeValidator(_ipv4), _schema(
    IPV4_PATTERN, "An IPv4 address (10.33.3.18)", format="ipv4")]
IPv4Net = Annotated[ipaddress.IPv4Network, BeforeValidator(_net), _schema(
    rf"^({_OCTET}\.){{3}}{_OCTET}(/(3[0-2]|[12]?[0-9]))?$", "An IPv4 network in CIDR form (10.33.3.0/24)")]
HttpUrl = Annotated[str, AfterValidator(_http_url), _schema(
    r"^https?://[A-Za-z0-9._~%+=:-]+(/[A-Za-z0-9._~/%+=:@-]*)?$",
    "An http:// or https:// URL without user or password (http://10.33.3.18:8080)")]
AbsPath = Annotated[str, AfterValidator(_abs_path), _schema(
    '^/[^\\s,"\\\\#]*$', 'An absolute path without spaces, line breaks or , " \\ #')]
RedfishUrl = Annotated[str, AfterValidator(_redfish_url), _schema(
    r"^https://[A-Za-z0-9._~%+=:-]+/?$", "A BMC's Redfish address: https://HOST[:PORT]")]
RedfishId = Annotated[str, AfterValidator(_redfish_id), _schema(
    "^[A-Za-z0-9._~-]+$", "A Redfish system id, as in /redfish/v1/Systems/<id>")]
# An RHCOS kernel/initramfs/rootfs/image: a path under http_base_url or a full URL.
Artifact = Annotated[str, AfterValidator(_artifact), _schema(
    f"^[{_SAFE_CHARS}]+$", "A path under http_base_url, or a full http(s) URL: letters, digits and "
    ". _ ~ / % + = : @ - only (written unquoted into boot files)")]
DevicePath = Annotated[str, AfterValidator(_device), _schema(
    r"^/dev/[A-Za-z0-9._:+@-]+(/[A-Za-z0-9._:+@-]+)*$",
    "A disk device: /dev/sda, /dev/nvme0n1, /dev/disk/by-id/...")]
KernelArg = Annotated[str, AfterValidator(_kernel_arg), _schema(
    f"^[,{_SAFE_CHARS}]+$", "One extra kernel argument, no spaces or quotes (console=ttyS0,115200n8)")]
HypervisorUri = Annotated[str, AfterValidator(_hypervisor_uri), _schema(
    r"^(qemu|test)(\+(unix|ssh|libssh|libssh2|tls))?://[^\s]*$",
    "A libvirt URI: qemu:///system, qemu+ssh://root@kvm1/system")]
# A program upi writes into a systemd ExecStart= and a crontab line: no spaces,
# no `%` (a specifier to systemd, a newline to cron), no quotes.
_EXEC = re.compile(r"/[A-Za-z0-9._/+@-]+")


def _exec_path(value: str) -> str:
    if not _fullmatch(_EXEC, value) or ".." in value.split("/"):
        raise ValueError(f"{_shown(value)} is not an absolute program path of letters, digits and "
                         ". _ / + @ - (it is written into systemd units and a crontab)")
    return value


ExecPath = Annotated[str, AfterValidator(_exec_path), _schema(
    r"^/[A-Za-z0-9._/+@-]+$", "An absolute path of a program: /usr/local/bin/upi")]
# A network interface or bridge name (Linux: at most 15 characters).
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")


def _ifname(value: str) -> str:
    if not _fullmatch(_IFNAME, value):
        raise ValueError(f"{_shown(value)} is not a network interface name (1-15 letters, digits "
                         "and _ . : -, as `ip link` shows it: eno1, br0)")
    return value


InterfaceName = Annotated[str, AfterValidator(_ifname), _schema(
    r"^[A-Za-z0-9_.:-]{1,15}$", "A network interface or bridge name (eno1, br0): at most 15 characters")]
# YAML `true` is not 1 and "22" is not 22: whole numbers are written as numbers.
StrictInt = Annotated[int, Strict()]
StrictFloat = Annotated[float, Strict()]
