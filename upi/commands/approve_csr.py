"""`upi approve-csr`: the library call behind it (upi.csr.approve, which `upi wait` runs too)."""

from __future__ import annotations

from upi.csr.approve import Mode, approve_csr

__all__ = ["Mode", "approve_csr"]
