from __future__ import annotations

from datetime import UTC, datetime, timedelta

from upi.facts.freshness import ignition_freshness

MADE = datetime(2026, 11, 22, 8, 0, tzinfo=UTC)


def test_fresh_ignition_is_ok() -> None:
    assert ignition_freshness(MADE, MADE + timedelta(hours=11, minutes=59)).level == "ok"


def test_ignition_older_than_12h_warns_with_time_left() -> None:
    verdict = ignition_freshness(MADE, MADE + timedelta(hours=13))
    assert verdict.level == "warn"
    assert "13.0 h old" in verdict.message and "expire in 11.0 h" in verdict.message


def test_ignition_older_than_24h_is_expired() -> None:
    assert ignition_freshness(MADE, MADE + timedelta(hours=24)).level == "expired"
