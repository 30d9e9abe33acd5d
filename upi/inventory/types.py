"""Reusable validated scalar types for the inventory model."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_DOMAIN_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", re.IGNORECASE)


def _mac(value: str) -> str:
    mac = value.strip().lower().replace("-", ":")
    if not _MAC.match(mac):
        raise ValueError(f"{value!r} is not a MAC address (want six hex pairs, 52:54:00:aa:bb:cc)")
    if int(mac[:2], 16) & 1:
        raise ValueError(f"{value!r} is a multicast MAC address; a NIC has a unicast one")
    return mac


def _label(value: str) -> str:
    if not _LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS label (lowercase letters, digits and hyphens, "
            "1-63 characters, no hyphen at either end)"
        )
    return value


def _domain(value: str) -> str:
    name = value.rstrip(".")
    parts = name.split(".")
    if len(name) > 253 or not all(_DOMAIN_LABEL.match(p) for p in parts):
        raise ValueError(f"{value!r} is not a DNS domain name")
    return name.lower()


def _stringify(value: object) -> object:
    # YAML reads `openshift_version: 4.10` as the float 4.1: refuse, don't guess.
    if isinstance(value, float):
        raise ValueError(f"{value!r} must be quoted (YAML reads 4.10 as 4.1): write \"{value}\"")
    return value


def _version(value: str) -> str:
    m = re.fullmatch(r"4\.(\d+)(\.\d+)?", value.strip())
    if not m or not 1 <= int(m.group(1)) <= 99:
        raise ValueError(f"{value!r} is not an OpenShift 4 version (write \"4.16\" or \"4.16.3\")")
    return value.strip()


def _ipv4(value: object) -> ipaddress.IPv4Address:
    try:
        return ipaddress.IPv4Address(str(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address") from None


def _net(value: object) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(str(value))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an IPv4 network in CIDR form ({exc})") from None


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+(/\S*)?$", value):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value.rstrip("/")


def _abs_path(value: str) -> str:
    if not value.startswith("/") or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not an absolute path without spaces")
    return value


MacAddress = Annotated[str, AfterValidator(_mac)]
DnsLabel = Annotated[str, AfterValidator(_label)]
DomainName = Annotated[str, AfterValidator(_domain)]
OpenShiftVersion = Annotated[str, BeforeValidator(_stringify), AfterValidator(_version)]
IPv4 = Annotated[ipaddress.IPv4Address, BeforeValidator(_ipv4)]
IPv4Net = Annotated[ipaddress.IPv4Network, BeforeValidator(_net)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
AbsPath = Annotated[str, AfterValidator(_abs_path)]
