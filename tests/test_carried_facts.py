"""Each facts file upi carries (upi/inventory/*.json) is what tests/carried_facts.py builds."""

from __future__ import annotations

import carried_facts
import pytest


@pytest.mark.parametrize("name", sorted(carried_facts.CARRIED))
def test_the_carried_facts_file_is_its_rebuild_from_the_extracted_upstream_files(name: str) -> None:
    carried = carried_facts.TARGET_DIR / name
    assert carried.exists() and carried.read_text() == carried_facts.text(name), (
        f"upi/inventory/{name} differs from its rebuild from tests/data/: run "
        "`python tests/carried_facts.py` and commit the rewritten file")


def test_every_carried_facts_file_has_a_builder() -> None:
    # A facts JSON added under upi/inventory/ without a builder here would drift unseen.
    assert sorted(p.name for p in carried_facts.TARGET_DIR.glob("*.json")) == sorted(carried_facts.CARRIED)
