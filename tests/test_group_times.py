"""docs/testing.md's groups: the word after `test_` in a file's name."""

from __future__ import annotations

from group_times import group_of


def test_a_group_is_the_word_after_test() -> None:
    assert group_of("tests/test_check_dns.py") == "check"
    assert group_of("tests/test_pxe_secure_boot.py") == "pxe"
    assert group_of("tests/test_relay.py") == "relay"
    assert group_of("tests/fresh/helper.py") == "helper.py"
