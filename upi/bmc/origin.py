"""A BMC's own origin: the only place its password is sent.

Redfish is hypermedia: the service root links to the Systems collection,
which links to each system, which links to its settings object, Secure
Boot, reset action and action info; answers may redirect or name a task
monitor. Each link is the BMC's word, and basic auth goes with every
request that follows one. So a link is followed only when it resolves
(RFC 3986, against the BMC's address) to the BMC's own origin: the same
scheme, host and port, with no user or password in it. DSP0266 (6.7,
"Redfish-defined URIs and relative reference rules") has services link with
relative references; an absolute URL to the same origin is accepted too.

`Link.check` is the one test; the transport adapter (upi.bmc.bounded) runs
it on every request before any byte leaves, redirects included, and
`OriginConnector` resolves links the way RFC 3986 does before requests sees
them (sushy takes `//host/path` for a URL without a scheme).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

from sushy.connector import Connector

from upi.redact import hide_userinfo

_DEFAULT_PORT = {"https": 443, "http": 80}
# A host as a BMC address may name it: letters, digits, . _ -, or a bracketed IPv6 address.
_NETLOC = re.compile(r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")  # ASCII digits only


class OffOrigin(Exception):  # noqa: N818 - not an error of upi's, a reason to report
    """A Redfish link leads away from the BMC's own origin; nothing was sent to it."""

    def __init__(self, url: str) -> None:
        self.url = hide_userinfo(url)[:200]
        super().__init__(f"not Redfish: it links to {self.url}, which is not on the BMC's own "
                         "address (nothing was sent there)")


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute URL without user or password, else None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORT or not _NETLOC.fullmatch(parts.netloc) or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORT[scheme]


class Link:
    """The links of one BMC, judged against its address (`https://HOST[:PORT]`)."""

    def __init__(self, base: str) -> None:
        origin = _origin(base)
        if origin is None:
            raise ValueError(f"{hide_userinfo(base)!r} is not a BMC address")
        self.base = base.rstrip("/") + "/"
        self.origin = origin

    def resolve(self, link: str) -> str:
        """The absolute URL `link` means, as RFC 3986 resolves it against the BMC's address."""
        return urljoin(self.base, link)

    def check(self, url: str) -> str:
        """`url` when it is on the BMC's own origin; OffOrigin otherwise."""
        if "\\" in url or any(c.isspace() or not c.isprintable() for c in url):
            raise OffOrigin(url)  # parsers disagree on these: none is followed
        if _origin(url) != self.origin:
            raise OffOrigin(url)
        return url


class OriginConnector(Connector):  # type: ignore[misc]  # sushy is untyped
    """sushy's connector, resolving each link against the BMC's address per RFC 3986.

    sushy joins a path with the address unless it has a host of its own, and
    passes `//host/path` on as it is; resolved here, the adapter sees the URL
    the link means and refuses it when it leaves the BMC.
    """

    def __init__(self, url: str, **kwargs: Any) -> None:
        self.link = Link(url)
        super().__init__(url, **kwargs)

    def _op(self, method: str, path: str = "", *args: Any, **kwargs: Any) -> Any:
        return super()._op(method, self.link.resolve(path), *args, **kwargs)
