"""What openshift-install refuses in the install-config upi writes, refused here first.

The real installer (../shared/reference/real-installer.md) exits 3 on these;
an admin would learn of them only at `upi ignition`, after rendering and
pushing everything. Each message says what to write instead and ends with
the installer's own reason, `(openshift-install: ...)`, so the two can be
matched. The pull secret's rules are in pullsecret.py.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from upi.digits import natural
from upi.inventory.model import Inventory
from upi.inventory.types import shown

if TYPE_CHECKING:
    from upi.inventory.rules import Finding

# The key types a FIPS cluster takes (the installer: "Please use rsa or ecdsa").
FIPS_KEYS = re.compile(r"ecdsa-sha2-nistp[0-9]{3}|ssh-rsa")
# What a proxy URL may hold: RFC 3986 characters, no space, quote, backslash or control.
_URL = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")
# A lowercase RFC 1123 subdomain (what the installer takes in noProxy and as a registry host).
_SUBDOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
# github.com/distribution/reference: a registry host[:port] and lowercase path components.
_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(rf"{_HOST_PART}(?:\.{_HOST_PART})*(?::[0-9]+)?")
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
MAX_REPOSITORY = 255
# OVN-Kubernetes' masquerade subnet: the default of new clusters from 4.17; before,
# 169.254.169.0/29, which lies inside it.
OVN_MASQUERADE = ipaddress.IPv4Network("169.254.0.0/17")
# metadata.name: the installer keeps room for the infra ID suffix.
MAX_CLUSTER_NAME = 54
_NO_PROXY_RULE = "each element of noProxy must be a IP, CIDR or domain without wildcard characters"


def installer_reason(reason: str) -> str:
    """`(openshift-install: reason)`: how every message ends, to be matched with the installer's."""
    return f"(openshift-install: {reason})"


def installer_rules(inv: Inventory) -> Iterator[Finding]:
    """Every refusal of the installer that the inventory alone shows (no files read).

    Host bits are refused where the model reads a network (types.IPv4Net).
    """
    yield from _cluster_name(inv)
    yield from _proxy(inv)
    yield from _mirrors(inv)


def installer_warnings(inv: Inventory) -> list[str]:
    """What the installer needs beyond the inventory, and secrets it will publish."""
    out = []
    c = inv.cluster
    if c.fips:
        out.append(
            "cluster.fips is true: openshift-install refuses it unless it is the FIPS-capable "
            "installer binary for RHEL 9 running on a host booted in FIPS mode: run upi ignition "
            "there " + installer_reason("fips: Forbidden: target cluster is in FIPS mode, use the "
                                  "FIPS-capable installer binary for RHEL 9 on a host with FIPS enabled.")
        )
    if c.additional_trust_bundle_file and not c.proxy and c.version < (4, 12):
        out.append(
            "cluster.additional_trust_bundle_file without a proxy: before 4.12 there is no "
            f"additionalTrustBundlePolicy: Always, so in {c.openshift_version} the cluster Proxy "
            "object keeps trustedCA empty and a mirror registry's CA is not trusted cluster-wide "
            "after bootstrap: add it to the Proxy's trustedCA after install"
        )
    proxy = c.proxy
    for key in ("http_proxy", "https_proxy"):
        value = getattr(proxy, key) if proxy else None
        if value and "@" in _netloc(value):
            out.append(
                f"cluster.proxy.{key} holds a user or password: it goes into the cluster's Proxy "
                "object and into bootstrap.ign, which is served over plain HTTP; use a proxy "
                "that needs no credentials from the nodes, or keep the HTTP server private"
            )
    return out


def _netloc(url: str) -> str:
    try:
        return urlsplit(url).netloc
    except ValueError:
        return ""


def _cluster_name(inv: Inventory) -> Iterator[Finding]:
    # A cross-field rule, not a field one: a long name still gets the FQDN rules' findings too.
    name = inv.cluster.name
    if len(name) > MAX_CLUSTER_NAME:
        yield ("cluster", "name"), (
            f"{name!r} has {len(name)} characters; the installer takes at most {MAX_CLUSTER_NAME} "
            + installer_reason(f"metadata.name: must be no more than {MAX_CLUSTER_NAME} characters")
        )


def masquerade_overlap(net: ipaddress.IPv4Network) -> str | None:
    """Why `net` may not be a network of an OVN-Kubernetes cluster, if it overlaps the masquerade subnet."""
    if not net.overlaps(OVN_MASQUERADE):
        return None
    return (
        f"{net} overlaps OVN-Kubernetes' masquerade subnet {OVN_MASQUERADE} (link-local space, "
        "OVN's default from 4.17; before 4.17 OVN masquerades in 169.254.169.0/29, inside it) "
        + installer_reason(f"must not overlap with OVNKubernetes default masquerade subnet {OVN_MASQUERADE}")
    )


# --- proxy ------------------------------------------------------------------------------

def _proxy(inv: Inventory) -> Iterator[Finding]:
    proxy = inv.cluster.proxy
    if proxy is None:
        return
    if not proxy.http_proxy and not proxy.https_proxy:
        yield ("cluster", "proxy"), (
            "names neither http_proxy nor https_proxy (no_proxy alone means nothing) "
            + installer_reason("proxy: Required value: must include httpProxy or httpsProxy")
        )
    inside = {"cluster_network": inv.network.cluster_network,
              "service_network": inv.network.service_network}
    for key, installer_key, schemes in (("http_proxy", "httpProxy", ("http",)),
                                        ("https_proxy", "httpsProxy", ("http", "https"))):
        value = getattr(proxy, key)
        if value:
            problem = _proxy_url_problem(value, installer_key, schemes, inside)
            if problem:
                yield ("cluster", "proxy", key), problem
    yield from _no_proxy(proxy.no_proxy)


def _proxy_url_problem(url: str, key: str, schemes: tuple[str, ...],
                       inside: dict[str, ipaddress.IPv4Network]) -> str | None:
    value = masked(url)  # what a message may show: a proxy password is a secret
    problem = _url_problem(url, value, key, schemes, inside)
    return problem.replace(url, value) if problem else None


def masked(url: str) -> str:
    """`url` with any user and password before the host replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    netloc = rest.split("/", 1)[0]
    if "@" not in netloc:
        return url
    return f"{scheme}{sep}***@{rest[len(netloc.rpartition('@')[0]) + 1:]}"


def _url_problem(url: str, value: str, key: str, schemes: tuple[str, ...],
                 inside: dict[str, ipaddress.IPv4Network]) -> str | None:
    supported = ", ".join(f'"{s}"' for s in schemes)
    if not url.isascii() or not _URL.fullmatch(url):
        return (f"{shown(value)} is not a URL: letters, digits and URL punctuation only (no spaces, "
                "quotes, backslashes, control characters or line breaks)")
    scheme = go_scheme(url)
    if scheme is None or scheme not in schemes:
        if scheme is None:
            why = "invalid URI for request"
        else:
            why = f'Unsupported value: "{scheme}": supported values: {supported}'
        if "://" not in url:
            return f"{shown(value)} has no scheme: write {schemes[0]}://{value} " + installer_reason(
                f"proxy.{key}: {why}")
        return f"{shown(value)}: the installer takes only {' or '.join(schemes)}:// here " + installer_reason(
            f"proxy.{key}: {why}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        return f"{shown(value)} is not a proxy URL (want {scheme}://HOST[:PORT], a port 1-65535)"
    if not parts.hostname:
        return f"{shown(value)} names no proxy host (want {scheme}://HOST[:PORT])"
    try:
        host = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return None
    for name, net in inside.items():
        if host in net:
            kind = name.split("_")[0]  # the installer's word: cluster, service
            return (f"{host} is inside {name} {net}: a proxy must not be part of the cluster networks, "
                    "the nodes would route it into the cluster "
                    + installer_reason(f"proxy.{key}: proxy value is part of the {kind} networks"))
    return None


def go_scheme(url: str) -> str | None:
    """The scheme Go's net/url finds (lower case): letters first, up to a colon; None if none.

    `proxy.example.com:3128` has the scheme `proxy.example.com` to Go, `10.0.0.1:3128` none.
    """
    for i, c in enumerate(url):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-.") and i:
            continue
        if c == ":" and i:
            return url[:i].lower()
        return None
    return None


def _no_proxy(entries: list[str]) -> Iterator[Finding]:
    if entries == ["*"]:
        return  # `*` alone: no proxy for anything, which the installer accepts
    for i, entry in enumerate(entries):
        why = _no_proxy_problem(entry)
        if why:
            yield ("cluster", "proxy", "no_proxy", i), f"{shown(entry)} {why}"


def _no_proxy_problem(entry: str) -> str | None:
    if not entry.isascii() or not entry.isprintable() or any(c.isspace() for c in entry):
        return ("holds a space, a line break or a character that is not ASCII "
                + installer_reason("noProxy must not have spaces"))
    if "," in entry:
        return "holds a comma: write one entry per list item (upi joins them with commas)"
    if entry == "*":
        return ("is * among other entries: * (no proxy at all) must be the only entry "
                + installer_reason(_NO_PROXY_RULE))
    if "*" in entry:
        suffix = entry.lstrip("*")
        hint = f": write {suffix if suffix.startswith('.') else '.' + suffix} (a leading dot " \
               "matches every subdomain)" if suffix.strip(".") else ""
        return f"is a wildcard{hint} " + installer_reason(_NO_PROXY_RULE)
    try:
        ipaddress.ip_network(entry, strict=False)
        return None
    except ValueError:
        pass
    domain = entry.removeprefix(".")
    if len(domain) <= 253 and _SUBDOMAIN.fullmatch(domain):
        return None
    lower = domain.lower()
    if lower != domain and len(domain) <= 253 and _SUBDOMAIN.fullmatch(lower):
        return f"must be lower case ({entry.lower()}) " + installer_reason(_NO_PROXY_RULE)
    return ("is not an IP address, a CIDR or a domain name (no port, no scheme) "
            + installer_reason(_NO_PROXY_RULE))


# --- mirrors ----------------------------------------------------------------------------

def _mirrors(inv: Inventory) -> Iterator[Finding]:
    for i, mirror in enumerate(inv.cluster.mirrors):
        places: list[tuple[tuple[str | int, ...], str]] = [(("source",), mirror.source)]
        places += [(("mirrors", j), value) for j, value in enumerate(mirror.mirrors)]
        for where, value in places:
            problem = repository_problem(value)
            if problem:
                yield ("cluster", "mirrors", i, *where), f"{shown(value)} {problem}"


def repository_problem(value: str) -> str | None:
    """Why `value` is not what a mirror entry must be: a repository, or a bare registry host[:port]."""
    if not value.isascii() or not value.isprintable() or any(c.isspace() for c in value):
        return ("holds a space, a line break or a character that is not ASCII "
                + installer_reason("invalid reference format"))
    if "://" in value:
        rest = value.split("://", 1)[1].rstrip("/")
        return (f"is written as a URL: name the repository without a scheme ({rest}) "
                + installer_reason("invalid reference format"))
    if len(value) > MAX_REPOSITORY:
        return (f"is longer than {MAX_REPOSITORY} characters "
                + installer_reason("repository name must not be more than 255 characters"))
    if "/" not in value:
        return _bare_registry_problem(value)
    registry, path = value.split("/", 1)
    if not ("." in registry or ":" in registry or registry == "localhost"):
        return (f"names no registry host: write REGISTRY/{value} (a host with a dot or a port) "
                + installer_reason("the repository provided is invalid"))
    if not _REGISTRY.fullmatch(registry):
        return "does not start with a registry host[:port] " + installer_reason("invalid reference format")
    name, reference = _split_reference(path)
    components = name.split("/")
    if not all(_COMPONENT.fullmatch(c) for c in components):
        if all(_COMPONENT.fullmatch(c) for c in name.lower().split("/")):
            return ("must be lower case after the registry host "
                    + installer_reason("repository name must be lowercase"))
        return ("is not a repository (lower case letters, digits and . _ - between slashes) "
                + installer_reason("invalid reference format"))
    if reference is not None:
        if not reference:
            return "is not a repository " + installer_reason("invalid reference format")
        return (f"is a reference (it ends in {reference[:20]}): name the repository alone "
                f"({registry}/{name}) " + installer_reason("must be repository--not reference"))
    if registry in ("docker.io", "index.docker.io") and len(components) == 1:
        return (f"is not in canonical form: write docker.io/library/{name} "
                + installer_reason("the repository provided is invalid"))
    return None


def _split_reference(path: str) -> tuple[str, str | None]:
    """(repository, ':tag' / '@digest' / '' for a malformed one, or None)."""
    reference = None
    if "@" in path:
        path, digest = path.split("@", 1)
        reference = f"@{digest}" if _DIGEST.fullmatch(digest) else ""
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        tag = last.split(":", 1)[1]
        path = path[: len(path) - len(tag) - 1]
        reference = f":{tag}" if _TAG.fullmatch(tag) and reference != "" else ""
    return path, reference


def _bare_registry_problem(value: str) -> str | None:
    # The installer parses it as a reference first (a name, a tag, a digest), then, the name
    # not being canonical, takes it as host[:port] (net.SplitHostPort, then a host name or IP).
    grammar = re.compile(rf"{_COMPONENT.pattern}(?::{_TAG.pattern})?(?:@{_DIGEST.pattern})?")
    if not grammar.fullmatch(value):
        if grammar.fullmatch(value.lower()):
            return "must be lower case " + installer_reason("repository name must be lowercase")
        return ("is neither a repository nor a registry host[:port] "
                + installer_reason("invalid reference format"))
    if "@" in value:
        return ("is a reference (it names a digest): a bare registry is host[:port] "
                + installer_reason("the repository provided is invalid"))
    host, _, port = value.partition(":")
    if port and not port.isdigit():
        return (f"is a reference (it ends in :{port[:20]}): a bare registry is host[:port] "
                + installer_reason("must be repository--not reference"))
    if port and not 0 < int(port) < 65536:
        return f"has port {port[:8]}, not 1-65535 " + installer_reason("invalid reference format")
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if len(host) <= 253 and _SUBDOMAIN.fullmatch(host):
        return None
    return ("is neither a repository nor a registry host[:port] "
            + installer_reason("the repository provided is invalid"))


# --- files ------------------------------------------------------------------------------

def fips_ssh_key(inv: Inventory, key_text: str) -> Iterator[Finding]:
    """A FIPS cluster takes rsa and ecdsa keys only."""
    kind = key_text.split(None, 1)[0] if key_text.split() else ""
    if inv.cluster.fips and not FIPS_KEYS.fullmatch(kind):
        yield ("cluster", "ssh_key_file"), (
            f"{inv.cluster.ssh_key_file} is an {kind} key, which a FIPS cluster (cluster.fips: true) "
            "cannot use: name an rsa or ecdsa public key "
            + installer_reason(f"sshKey: SSH key type {kind} unavailable when FIPS is enabled. "
                         "Please use rsa or ecdsa.")
        )


# An image a pod pulls: the OCI digest algorithms registered in image-spec descriptor.md.
_IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")


def image_problem(value: str) -> str | None:
    """Why `value` is not an image reference a pod can pull: REGISTRY/REPOSITORY[:TAG][@DIGEST].

    The grammar is github.com/distribution/reference's (reference.go), with the
    registry host required: a short name resolves differently per node's
    registries.conf, or not at all under CRI-O's enforcing short-name mode.
    """
    if not value.isascii() or not value.isprintable() or any(c.isspace() for c in value):
        return "holds a space, a line break or a character that is not ASCII"
    if "://" in value:
        return f"is written as a URL: name the image without a scheme ({value.split('://', 1)[1]})"
    rest, _, digest = value.partition("@")
    if digest and not _IMAGE_DIGEST.fullmatch(digest):
        return "has a digest that is not sha256:<64 hex digits> (or sha512:<128>), lower case"
    registry, slash, path = rest.partition("/")
    if not slash or not ("." in registry or ":" in registry or registry == "localhost"):
        return "names no registry host: write REGISTRY/REPOSITORY[:TAG] (a host with a dot or a port)"
    if not _REGISTRY.fullmatch(registry) or not _port_ok(registry):
        return "does not start with a registry host[:port] (port 1-65535)"
    name, colon, tag = path.partition(":") if ":" in path.rsplit("/", 1)[-1] else (path, "", "")
    if colon and not _TAG.fullmatch(tag):
        return "has a tag that is not 1-128 letters, digits, _ . - (not starting with . or -)"
    if not name or not all(_COMPONENT.fullmatch(c) for c in name.split("/")):
        return "is not a repository (lower case letters, digits and . _ - between slashes)"
    if len(registry) + 1 + len(name) > MAX_REPOSITORY:
        return f"has a name longer than {MAX_REPOSITORY} characters"
    return None


def _port_ok(registry: str) -> bool:
    _, colon, port = registry.partition(":")
    number = natural(port) if colon else 1
    return number is not None and 0 < number < 65536
