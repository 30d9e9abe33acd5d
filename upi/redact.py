"""URLs as a message may show them: the user and password before the host hidden.

A URL that carries credentials (`https://admin:pw@host`) is refused wherever
upi reads one, and the message that refuses it must not print the password
it refuses. Every message that quotes a URL it did not build itself passes
it through `hide_userinfo` first.
"""

from __future__ import annotations

import re

# The authority of a URL (RFC 3986 3.2: after `//`, up to the first / ? # or the
# end), as requests and urllib3 split it; a quote or a line break ends it in a message.
# A space does not: a password may hold one, and hiding too much is safe.
_AUTHORITY = re.compile(r"//([^/?#'\"\r\n]*)")


def hide_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` replaced by `***@`."""

    def hide(m: re.Match[str]) -> str:
        authority = m.group(1)
        if "@" not in authority:
            return m.group(0)
        return "//***@" + authority.rpartition("@")[2]

    return _AUTHORITY.sub(hide, text)


def has_userinfo(url: str) -> bool:
    """Whether `url` names a user or a password before its host."""
    m = _AUTHORITY.search(url)
    return bool(m and "@" in m.group(1))
