"""Numbers read from a peer or a flag: ASCII digits only, of a bounded length.

`str.isdigit()` is true for '²' and '٣' (which `int()` then refuses or reads
as 3), and `int()` raises on more than 4,300 digits: a check like
`v.isdigit() and int(v) < N` crashes on hostile input or lets a strange
spelling through. Every such value goes through `natural()` instead.
"""

from __future__ import annotations

MAX_DIGITS = 19  # 2**63 has 19 digits: any count upi reads fits, anything longer is refused


def natural(text: str, *, leading_zeros: bool = False, max_digits: int = MAX_DIGITS) -> int | None:
    """`text` as a non-negative integer, or None when it is not plain ASCII digits.

    Leading zeros (`0512`) are refused unless `leading_zeros` (HTTP's
    Content-Length is 1*DIGIT, RFC 9110 8.6); so is a value longer than
    `max_digits` digits (after those zeros).
    """
    if not text or not text.isascii() or not text.isdigit():
        return None
    significant = text.lstrip("0") or "0"
    if significant != text and not leading_zeros:
        return None
    if len(significant) > max_digits:
        return None
    return int(significant)
