"""Render every config file of an inventory into memory (DESIGN.md render layout)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from upi import __version__
from upi.facts import BootEntry, VmSpec, boot_entries, dns_records, host_entries, lb_pools, vm_specs
from upi.facts.boot import (
    GRUB_FALLBACK,
    GRUB_IMAGE,
    PXELINUX_FALLBACK,
    PXELINUX_IMAGE,
    SECURE_BOOT_TAG,
    SHIM_IMAGE,
    SIGNED_GRUB_DISPATCH,
    secure_boot_nodes,
)
from upi.facts.installconfig import install_config
from upi.gpu.objects import render_files as gpu_files
from upi.inventory.model import Firmware, Inventory
from upi.inventory.segments import segments
from upi.mirror.imageset import render_files as mirror_files
from upi.selfpath import upi_command
from upi.templating import render_each, render_template

SECRET = 0o600
PUBLIC = 0o644
SCRIPT = 0o755
MANIFEST = "manifest.json"

# Where the rendered approver units expect the inventory and the kubeconfig on
# the host that runs them (docs/approve-csr.md says how to put them there).
# upi itself is the one that rendered them, or the inventory's csr_approver.upi.
CONFIG_DIR = "/etc/upi"


@dataclass(frozen=True)
class RenderedFile:
    """One output file: path relative to the render dir, bytes, mode."""

    path: str
    content: bytes
    mode: int

    @property
    def sha256(self) -> str:
        """Hex digest of the content, as manifest.json records it."""
        return hashlib.sha256(self.content).hexdigest()


def _common(inv: Inventory) -> dict[str, object]:
    return {"domain": inv.cluster.domain, "version": inv.cluster.openshift_version}


def _dns(inv: Inventory) -> list[RenderedFile]:
    records = dns_records(inv)
    hosts = host_entries(records)
    ctx = {
        **_common(inv),
        "hosts": hosts,
        "upstream": [str(s) for s in inv.network.upstream_dns],
        "wildcards": [r for r in records if r.kind == "WILDCARD"],
        "srv": [r for r in records if r.kind == "SRV"],
    }
    return [
        _file("hosts", render_template("hosts.j2", **ctx)),
        _file("dnsmasq/dns.conf", render_template("dnsmasq/dns.conf.j2", **ctx)),
    ]


def _dhcp(inv: Inventory) -> RenderedFile:
    ctx = {
        **_common(inv),
        "interface": inv.provisioner.interface,
        "dhcp_range": inv.provisioner.dhcp_range,
        "segments": segments(inv),
        "dns_server": inv.provisioner.ip,
        "leases": inv.nodes,
        "grub_image": GRUB_IMAGE,
        "pxelinux_image": PXELINUX_IMAGE,
        "secure_boot": secure_boot_nodes(inv),
        "secure_boot_tag": SECURE_BOOT_TAG,
        "shim_image": SHIM_IMAGE,
        "tftp_root": inv.provisioner.tftp_root,
        "dnsmasq_log": inv.provisioner.dnsmasq_log,
    }
    return _file("dnsmasq/dhcp-pxe.conf", render_template("dnsmasq/dhcp-pxe.conf.j2", **ctx))


def _boot(inv: Inventory, installed: frozenset[str] = frozenset(),
          own_ignition: frozenset[str] = frozenset()) -> list[RenderedFile]:
    out = [
        _file(PXELINUX_FALLBACK, render_template("tftp/pxelinux-default.j2", **_common(inv))),
        _file(GRUB_FALLBACK, render_template("tftp/grub-default.j2", **_common(inv))),
    ]
    # One template call per kind of file, not per node (render_each); the files are
    # those boot_file() makes.
    entries = boot_entries(inv, own_ignition)
    texts: dict[int, str] = {}  # entry's index -> its file
    for local in (False, True):
        for firmware in (Firmware.bios, Firmware.uefi):
            picked = [i for i, e in enumerate(entries)
                      if e.firmware is firmware and (e.node.name in installed) is local]
            name, var = _boot_template(firmware, installed=local)
            items = [entries[i].node if local else entries[i] for i in picked]
            texts.update(zip(picked, render_each(name, var, items), strict=True))
    out += [_file(e.config_path, texts[i]) for i, e in enumerate(entries)]
    if any(e.secure_boot for e in entries):
        out.append(_file(SIGNED_GRUB_DISPATCH, render_template("tftp/grub-dispatch.j2", **_common(inv))))
    return out


def _boot_template(firmware: Firmware, *, installed: bool) -> tuple[str, str]:
    """The template of a per-MAC file and the name it knows its subject by (e, or node)."""
    bios = firmware is Firmware.bios
    if installed:
        return ("tftp/pxelinux-local.j2" if bios else "tftp/grub-local.j2"), "node"
    return ("tftp/pxelinux.cfg.j2" if bios else "tftp/grub.cfg.j2"), "e"


def _firewall(inv: Inventory) -> list[RenderedFile]:
    from upi.facts.firewall import http_port, load_balancer_openings, provisioner_openings

    prov = inv.provisioner
    shared = prov.ip == inv.load_balancer.ip
    ctx = {**_common(inv), "shared": shared}
    return [
        _file("firewall/provisioner.sh", render_template(
            "firewall/provisioner.sh.j2", **ctx, ip=prov.ip, lb_ip=inv.load_balancer.ip,
            interface=prov.interface, openings=provisioner_openings(inv), tftp_root=prov.tftp_root,
            http_root=prov.http_root, dnsmasq_dir=prov.dnsmasq_dir, http_port=http_port(inv)),
            SCRIPT),
        _file("firewall/load-balancer.sh", render_template(
            "firewall/load-balancer.sh.j2", **ctx, ip=inv.load_balancer.ip, prov_ip=prov.ip,
            openings=load_balancer_openings(inv)), SCRIPT),
    ]


def _prepare(inv: Inventory) -> RenderedFile:
    """provisioner/prepare.sh: packages, web server, SELinux port, services, bridge (RHEL 9)."""
    from upi.facts.provisioner import HTTPD_DROP_IN, HTTPD_MAIN_CONF, prepare_plan

    return _file("provisioner/prepare.sh", render_template(
        "provisioner/prepare.sh.j2", p=prepare_plan(inv), drop_in=HTTPD_DROP_IN,
        main_conf=HTTPD_MAIN_CONF), SCRIPT)


def boot_file(e: BootEntry, *, installed: bool = False) -> RenderedFile:
    """One node's per-MAC file: the RHCOS installer, or (installed) its own disk."""
    name, var = _boot_template(e.firmware, installed=installed)
    return _file(e.config_path, render_template(name, **{var: e.node if installed else e}))


def boot_files(inv: Inventory, installed: frozenset[str] = frozenset()) -> list[RenderedFile]:
    """The tftp/ boot files (per-MAC and fallbacks) as render writes them: `upi check tftp`."""
    return _boot(inv, installed)


def haproxy_cfg(inv: Inventory, *, include_bootstrap: bool = True) -> RenderedFile:
    """haproxy/haproxy.cfg; without the bootstrap once bootstrap-complete (upi wait)."""
    pools = lb_pools(inv, include_bootstrap=include_bootstrap)
    return _file("haproxy/haproxy.cfg",
                 render_template("haproxy/haproxy.cfg.j2", pools=pools, **_common(inv)))


def domain_xml(vm: VmSpec) -> str:
    """The libvirt domain of one VM node (install phase): vms/<name>.xml and boot-vms."""
    return render_template("vms/domain.xml.j2", vm=vm)


def _vms(inv: Inventory) -> list[RenderedFile]:
    specs = vm_specs(inv)
    if not specs:
        return []
    out = [_file(f"vms/{vm.name}.xml", domain_xml(vm)) for vm in specs]
    script = render_template("vms/virt-install.sh.j2", vms=specs, **_common(inv))
    out.append(_file("vms/virt-install.sh", script, SCRIPT))
    return out


def _csr(inv: Inventory) -> list[RenderedFile]:
    base = f"{CONFIG_DIR}/{inv.cluster.name}"
    upi = inv.csr_approver.upi if inv.csr_approver and inv.csr_approver.upi else upi_command()
    ctx = {**_common(inv), "upi": upi, "inventory": f"{base}/inventory.yaml",
           "kubeconfig": f"{base}/kubeconfig"}
    names = ["upi-approve-csr.service", "upi-approve-csr-once.service",
             "upi-approve-csr.timer", "crontab"]
    return [_file(f"csr/{n}", render_template(f"csr/{n}.j2", **ctx)) for n in names]


def _file(path: str, text: str, mode: int = PUBLIC) -> RenderedFile:
    return RenderedFile(path, text.encode(), mode)


def manifest(files: list[RenderedFile], inv: Inventory, *, bootstrap_retired: bool = False,
             images: Mapping[str, object] | None = None) -> RenderedFile:
    """manifest.json: every file with its sha256 and mode (no timestamps: reproducible).

    `images`: the RHCOS files `upi images` staged, carried over as they were recorded.
    """
    doc: dict[str, object] = {
        "upi": __version__,
        "cluster": inv.cluster.domain,
        "openshift_version": inv.cluster.openshift_version,
    }
    if bootstrap_retired:
        doc["bootstrap_retired"] = True
    doc["files"] = {}
    if images:
        doc["images"] = dict(sorted(images.items()))
    # json.dumps(doc, indent=2) with the files written here: with an indent, json encodes in
    # Python, and 5,000 entries of one fixed shape took 15 ms. Same bytes (test_render_each).
    entries = ",\n".join(f'    {json.dumps(f.path)}: {{\n      "sha256": "{f.sha256}",\n'
                         f'      "mode": "{f.mode:04o}"\n    }}' for f in files)
    text = json.dumps(doc, indent=2)
    empty = '\n  "files": {}'  # the top-level key: the only one indented by two spaces
    at = text.index(empty) + len(empty) - 2
    text = text[:at] + ("{\n" + entries + "\n  }" if entries else "{}") + text[at + 2:]
    return _file(MANIFEST, text + "\n")


def install_config_yaml(inv: Inventory) -> str:
    """install-config.yaml as `upi render` and `upi ignition` write it (holds the pull secret)."""
    return render_template("install-config.yaml.j2", config=install_config(inv), **_common(inv))


def render_inventory(inv: Inventory, extra: Sequence[RenderedFile] = (), *,
                     retire_bootstrap: bool = False,
                     images: Mapping[str, object] | None = None,
                     installed: frozenset[str] = frozenset(),
                     own_ignition: frozenset[str] = frozenset(),
                     sink: Callable[[Sequence[RenderedFile]], None] | None = None) -> list[RenderedFile]:
    """Every file of the render layout plus `extra` (e.g. boot loaders), manifest.json last.

    `retire_bootstrap`: after bootstrap-complete the HAProxy pools leave the
    bootstrap out, and manifest.json says so (`upi wait` renders this way).
    `installed`: nodes whose per-MAC file boots their disk (upi.installed).
    `images`: the RHCOS files `upi images` recorded, kept in manifest.json.
    `own_ignition`: day-2 nodes whose per-MAC file names their own ignition file (upi nodes add).
    `sink`: given the per-MAC boot files (one per node) as soon as they are
    rendered, first, so a writer can create them while the rest renders
    (upi.staging.Stager); the list returned holds them too.
    """
    boot = _boot(inv, installed, own_ignition)
    if sink is not None:
        sink(boot)
    config = install_config_yaml(inv)
    files = [
        _file("install-config.yaml", config, SECRET),
        _file("install-config.yaml.orig", config, SECRET),
        *_dns(inv),
        _dhcp(inv),
        *boot,
        haproxy_cfg(inv, include_bootstrap=not retire_bootstrap),
        *_firewall(inv),
        _prepare(inv),
        *_vms(inv),
        *_csr(inv),
        *(_file(path, text) for path, text in gpu_files(inv)),
        *(_file(path, text) for path, text in mirror_files(inv)),
        *extra,
    ]
    return [*files, manifest(files, inv, bootstrap_retired=retire_bootstrap, images=images)]
