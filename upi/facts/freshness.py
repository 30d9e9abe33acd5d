"""Ignition files carry certificates that expire 24 h after they are made.

The docs say to boot within 12 h. `upi check http` (from the HTTP
Last-Modified header) and `upi wait` / `upi ignition` (from the time upi
recorded) judge age with this one rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

WARN_AFTER = timedelta(hours=12)
EXPIRED_AFTER = timedelta(hours=24)


@dataclass(frozen=True)
class Freshness:
    """`ok`, `warn` (older than 12 h) or `expired` (older than 24 h), with why."""

    level: Literal["ok", "warn", "expired"]
    age: timedelta
    message: str


def _hours(age: timedelta) -> str:
    return f"{age.total_seconds() / 3600:.1f} h"


def ignition_freshness(made_at: datetime, now: datetime) -> Freshness:
    """How usable ignition files made at `made_at` are at `now` (both timezone-aware)."""
    age = now - made_at
    if age >= EXPIRED_AFTER:
        return Freshness("expired", age, (
            f"the ignition files are {_hours(age)} old: their certificates expired at 24 h; "
            "run `upi ignition` again with a fresh assets directory"))
    if age >= WARN_AFTER:
        return Freshness("warn", age, (
            f"the ignition files are {_hours(age)} old: boot the nodes now, their "
            f"certificates expire in {_hours(EXPIRED_AFTER - age)}"))
    return Freshness("ok", age, f"the ignition files are {_hours(age)} old")
