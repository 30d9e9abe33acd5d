"""render_each (one template call for many files) writes what one call per file writes, byte for byte."""

from __future__ import annotations

import json

import pytest
from conftest import inventory_path

from upi.facts import boot_entries
from upi.inventory import load_inventory
from upi.inventory.model import Firmware
from upi.render import render_inventory
from upi.templating import loop_body, render_each, render_template

PER_MAC = [("tftp/grub.cfg.j2", "e", Firmware.uefi), ("tftp/pxelinux.cfg.j2", "e", Firmware.bios),
           ("tftp/grub-local.j2", "node", None), ("tftp/pxelinux-local.j2", "node", None)]


@pytest.mark.parametrize("inventory", ["dgxpod", "compact", "legacy-4.3"])
@pytest.mark.parametrize(("name", "var", "firmware"), PER_MAC)
def test_each_file_is_what_its_own_render_writes(inventory: str, name: str, var: str,
                                                 firmware: Firmware | None) -> None:
    entries = boot_entries(load_inventory(inventory_path(inventory)))
    items = [e if var == "e" else e.node for e in entries if firmware in (None, e.firmware)]
    assert items
    assert render_each(name, var, items) == [render_template(name, **{var: i}) for i in items]


def test_only_a_template_of_text_and_values_is_inlined() -> None:
    # hosts.j2 loops and branches; domain.xml.j2 is autoescaped: both are included.
    assert loop_body("hosts.j2") == "{% include 'hosts.j2' %}"
    assert loop_body("vms/domain.xml.j2") == "{% include 'vms/domain.xml.j2' %}"
    assert loop_body("tftp/grub.cfg.j2").startswith("# {{ e.node.name }}")


@pytest.mark.parametrize("inventory", ["dgxpod", "compact", "legacy-4.3"])
def test_manifest_is_json_dumps_with_an_indent_of_two(inventory: str) -> None:
    inv = load_inventory(inventory_path(inventory))
    files = render_inventory(inv, images={"rhcos/a.img": {"sha256": "0" * 64, "files": {}}})
    doc = json.loads(files[-1].content)
    assert files[-1].path == "manifest.json"
    assert files[-1].content.decode() == json.dumps(doc, indent=2) + "\n"
    assert list(doc["files"]) == [f.path for f in files[:-1]]
    assert doc["images"]["rhcos/a.img"]["files"] == {}
