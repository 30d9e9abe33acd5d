"""`upi.images.request_loaders`: the library, not the CLI, checks the loader options and picks the ISO.

The command only parses and prints (STYLE.md 1): the same checks hold for
any caller of the library, in the same order (the inventory first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import inventory_path

from upi.errors import InventoryError, UsageError
from upi.images import request_loaders


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "--from: name the RHCOS files to stage (--from SRC), or the signed loaders"),
    ({"iso": Path("live.iso"), "shim": Path("shimx64.efi")},
     "--iso: take shim and GRUB from the ISO, or pass --shim and --grub, not both"),
    ({"shim": Path("shimx64.efi")}, "--grub: shim and GRUB are staged as a pair"),
    ({"grub": Path("grubx64.efi")}, "--shim: shim and GRUB are staged as a pair"),
])
def test_bad_loader_options_are_refused_by_the_library(tmp_path: Path, kwargs, message: str) -> None:
    with pytest.raises(UsageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        request_loaders(inventory_path("dgxpod"), tmp_path / "out", None, **kwargs)
    assert not (tmp_path / "out").exists()


def test_without_secure_boot_nodes_no_iso_is_looked_for_and_nothing_is_staged(tmp_path: Path) -> None:
    said: list[str] = []
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "rhcos-live.x86_64.iso").write_bytes(b"not looked at")
    assert request_loaders(inventory_path("dgxpod"), tmp_path / "out", str(tmp_path / "src"),
                           say=said.append) == {}
    assert said == [] and not (tmp_path / "out").exists()


def test_a_broken_inventory_is_named_before_any_option(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [\n")
    with pytest.raises(InventoryError):
        request_loaders(bad, tmp_path / "out", None)
