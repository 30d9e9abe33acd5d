"""Every Redfish request bounded as a whole: an overall deadline and a size cap on the answer.

requests' timeout bounds the connect and each read, and each read restarts
it: a BMC sending one byte a second, or a body that never ends, would hold
`upi power` forever, and an endless body would fill memory first. The
adapter mounted on sushy's session gives every request a deadline (a
watchdog shuts the socket, from the connection's first byte to the answer's
last), and reads at most MAX_ANSWER bytes of an answer, announced or sent.
Given the BMC's `Link`, it also sends nothing that leaves the BMC's own
origin (upi.bmc.origin): every request passes here, redirects included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from upi.digits import natural
from upi.watchdog import Watchdog, Watched, watching

if TYPE_CHECKING:
    from upi.bmc.origin import Link

MAX_ANSWER = 16 * 1024 * 1024  # a Redfish resource is a few kB; a large collection well under 1 MiB
DEADLINE_FACTOR = 2.0  # a request may take twice the BMC's timeout: one to answer, one to send it
CHUNK = 64 * 1024



class AnswerRefused(Exception):  # noqa: N818 - not an error of upi's, a reason to report
    """The BMC's answer took too long or was too large (the message says which)."""


class _HttpConnection(Watched, HTTPConnection):
    pass


class _HttpsConnection(Watched, HTTPSConnection):
    pass


class _HttpPool(HTTPConnectionPool):
    ConnectionCls = _HttpConnection


class _HttpsPool(HTTPSConnectionPool):
    ConnectionCls = _HttpsConnection


class BoundedAdapter(HTTPAdapter):
    """An HTTPAdapter whose every request ends within `deadline` seconds, answer at most `max_bytes`."""

    def __init__(self, deadline: float, max_bytes: int | None = None, link: Link | None = None) -> None:
        self.deadline = deadline
        self.link = link  # None: any origin (the answer is still bounded)
        # None: the module's cap, read now (so a test can lower it).
        self.max_bytes = MAX_ANSWER if max_bytes is None else max_bytes
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        """The usual pool manager, with connections the watchdog can shut."""
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HttpPool, "https": _HttpsPool}

    def send(self, request: Any, stream: bool = False, timeout: Any = None, verify: Any = True,
             cert: Any = None, proxies: Any = None) -> Any:
        """Send, then read the whole answer within the deadline (raises AnswerRefused).

        Raises OffOrigin, before connecting, for a URL away from the BMC's origin.
        """
        if self.link is not None:
            self.link.check(request.url)
        with Watchdog(self.deadline) as dog, watching(dog):
            try:
                resp = super().send(request, stream=True, timeout=timeout, verify=verify, cert=cert,
                                    proxies=proxies)
                try:
                    resp._content = self._body(resp, dog)  # what requests' `.content` returns
                finally:
                    resp.close()
            except AnswerRefused:
                raise
            except Exception:
                if dog.fired:
                    raise self._late() from None
                raise
        if dog.fired:
            raise self._late()
        return resp

    def _late(self) -> AnswerRefused:
        return AnswerRefused(f"no complete answer within {self.deadline:g} s "
                             "(the BMC sends too slowly or never ends its answer)")

    def _body(self, resp: Any, dog: Watchdog) -> bytes:
        length = natural((resp.headers.get("Content-Length") or "").strip(), leading_zeros=True)
        if length is not None and length > self.max_bytes:
            raise AnswerRefused(f"answered {length:,} bytes, more than upi reads "
                                f"({self.max_bytes:,})")
        out = bytearray()
        for chunk in resp.iter_content(CHUNK):
            if dog.fired:
                raise self._late()
            out += chunk
            if len(out) > self.max_bytes:
                raise AnswerRefused(f"answered more than upi reads ({self.max_bytes:,} bytes)")
        return bytes(out)
