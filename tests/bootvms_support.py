"""libvirt's test driver for the boot-vms tests: a fresh node file per test."""

from __future__ import annotations

import xml.etree.ElementTree as ET  # noqa: S405 - parses libvirt's own XML
from pathlib import Path
from typing import Any

import pytest
from conftest import IN_CI

POOL_DIR = "/var/lib/libvirt/images"  # the inventories' default image_dir


def require_libvirt() -> Any:
    """The libvirt module; under CI=true its absence fails the test."""
    try:
        import libvirt
    except ImportError:
        message = "libvirt-python is not installed (make venv installs the libvirt extra)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return libvirt


def shut_off(domain_xml: str) -> str:
    """A domain for the node file, defined but shut off (the test driver starts the others)."""
    body = domain_xml[domain_xml.index("<domain"):]
    body = body.replace("<domain ", "<domain xmlns:test='http://libvirt.org/schemas/domain/test/1.0' ", 1)
    return body.replace("</domain>", "  <test:runstate>5</test:runstate>\n</domain>")


def node_uri(tmp_path: Path, *domains: str, name: str = "node", pool_dir: str | None = POOL_DIR) -> str:
    """Write a test-driver node file (a dir pool holding POOL_DIR, the given domains); its URI."""
    pool = (f"<pool type='dir'><name>default</name><target><path>{pool_dir}</path></target></pool>"
            if pool_dir else "")
    path = tmp_path / f"{name}.xml"
    path.write_text("<node>\n" + "\n".join(domains) + pool + "\n</node>\n")
    return f"test://{path.resolve()}"


def domain_root(dom: Any) -> ET.Element:
    """The persistent config of a test-driver domain, parsed."""
    return ET.fromstring(dom.XMLDesc(2))  # noqa: S314 - libvirt's own XML; 2 = VIR_DOMAIN_XML_INACTIVE
