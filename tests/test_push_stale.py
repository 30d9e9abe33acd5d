"""A node taken out of the inventory leaves nothing behind: render + push remove what upi placed for it.

Per-MAC boot files (GRUB for UEFI, pxelinux for BIOS), a day-2 node's own
ignition file, its DHCP host, DNS records and HAProxy entries; an admin's
own files in the TFTP root, and a stale file changed by hand, are left.
Pushed locally and over SSH to the real sshd, checked by the real dnsmasq
and haproxy (tests/pushkit.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from conftest import require
from pushkit import Site, Sshd, make_site
from realnginx import nginx
from realtftp import lab_ip, serve_tftp

from upi.cli import app
from upi.ownignition import with_nodes
from upi.render import RenderedFile
from upi.renderdir import transaction

BIOS_MAC, BIOS_IP = "52:54:00:77:03:49", "10.33.3.49"
GONE_UEFI = "var/lib/tftpboot/grub.cfg-01-b8-ce-f6-10-33-44"  # worker-0
GONE_BIOS = "var/lib/tftpboot/pxelinux.cfg/01-52-54-00-77-03-49"  # worker-9
GONE_IGN = "var/www/html/ignition/nodes/worker-0.ign"
ADMIN_FILES = {"var/lib/tftpboot/pxelinux.cfg/01-aa-bb-cc-dd-ee-ff": b"DEFAULT local\n",
               "var/lib/tftpboot/admin-notes.txt": b"the lab's own PXE menu lives here\n"}


@pytest.fixture(scope="module")
def sshd(sshd):
    """conftest's sshd: the push runs the real config checkers on the 'host'."""
    require("dnsmasq")
    require("haproxy")
    return sshd


@pytest.fixture(params=["local", "ssh"])
def site(request, runner, tmp_path: Path, example_dir: Path) -> Site:
    """dgxpod plus a BIOS worker (worker-9), and worker-0's own day-2 ignition, pushed once."""
    require("dnsmasq")
    require("haproxy")
    ssh: dict[str, object] = {"local": True}
    if request.param == "ssh":
        server: Sshd = request.getfixturevalue("sshd")
        known = tmp_path / "known_hosts"
        known.write_text(server.known_hosts_line())
        ssh = {"host": "127.0.0.1", "port": server.port, "user": "root", "known_hosts": str(known),
               "identity_file": str(server.client_key)}
    return build_site(runner, tmp_path, example_dir, ssh)


def build_site(runner, tmp_path: Path, example_dir: Path, ssh: dict[str, object]) -> Site:
    """The site of the `site` fixture, reached through `ssh`."""
    doc = yaml.safe_load((example_dir / "dgxpod.yaml").read_text())
    doc["nodes"].append({"name": "worker-9", "role": "worker", "mac": BIOS_MAC, "ip": BIOS_IP,
                         "firmware": "bios"})
    (example_dir / "dgxpod.yaml").write_text(yaml.safe_dump(doc))
    site = make_site(tmp_path, example_dir, runner, ssh)
    with transaction(site.out) as txn:  # as `upi nodes add` publishes worker-0's own ignition
        txn.commit(None, own=with_nodes(txn.records.own, ["worker-0"]), published=[
            RenderedFile("http/ignition/nodes/worker-0.ign", b'{"ignition":{"version":"3.2.0"}}\n', 0o600)])
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    assert _push(runner, site).exit_code == 0
    for rel, content in ADMIN_FILES.items():
        (site.root / rel).write_bytes(content)
    return site


def _push(runner, site: Site, *extra: str):
    return runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])


def _drop(runner, site: Site, *names: str) -> None:
    """The admin deletes the nodes from the inventory and renders again."""
    doc = yaml.safe_load(site.inventory.read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] not in names]
    site.inventory.write_text(yaml.safe_dump(doc))
    rendered = runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)])
    assert rendered.exit_code == 0, rendered.output


def test_removed_nodes_files_and_entries_are_gone_and_the_admins_files_stay(runner, site) -> None:
    for rel in (GONE_UEFI, GONE_BIOS, GONE_IGN):
        assert (site.root / rel).is_file(), rel
    _drop(runner, site, "worker-0", "worker-9")

    result = _push(runner, site, "--json")

    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    removed = sorted(f["dest"] for f in doc["files"] if f["status"] == "removed")
    assert removed == sorted(str(site.root / rel) for rel in (GONE_UEFI, GONE_BIOS, GONE_IGN))
    for rel in (GONE_UEFI, GONE_BIOS, GONE_IGN):
        assert not (site.root / rel).exists(), rel
    for rel, content in ADMIN_FILES.items():
        assert (site.root / rel).read_bytes() == content, rel
    for conf in ("etc/dnsmasq.d/dhcp-pxe.conf", "etc/dnsmasq.d/dns.conf", "etc/haproxy/haproxy.cfg"):
        text = (site.root / conf).read_text()
        for gone in ("10.33.3.44", "b8:ce:f6:10:33:44", BIOS_IP, BIOS_MAC, "worker-9"):
            assert gone not in text, (conf, gone)
    assert (site.root / "var/lib/tftpboot/grub.cfg-01-b8-ce-f6-10-33-46").is_file()  # worker-1 stays
    assert site.reload_log() == ["dnsmasq", "haproxy", "dnsmasq", "haproxy"]

    again = json.loads(_push(runner, site, "--json").output)
    assert [f for f in again["files"] if f["status"] != "unchanged"] == []
    assert again["commands"] == []


def test_a_dry_run_names_the_files_it_would_remove_and_removes_none(runner, site) -> None:
    _drop(runner, site, "worker-9")
    result = _push(runner, site, "--json", "--dry-run")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [f["dest"] for f in doc["files"] if f["status"] == "removed"] == [str(site.root / GONE_BIOS)]
    assert any(c["argv"] == ["rm", "-f", "--", str(site.root / GONE_BIOS)] for c in doc["commands"])
    assert (site.root / GONE_BIOS).is_file()


def test_a_stale_file_changed_by_hand_is_reported_and_left(runner, site) -> None:
    (site.root / GONE_BIOS).write_text("DEFAULT local\n# the admin's own edit\n")
    _drop(runner, site, "worker-9")
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    kept = [f for f in json.loads(result.output)["files"] if f["status"] == "kept"]
    assert [(f["dest"], f["note"]) for f in kept] == [
        (str(site.root / GONE_BIOS), "no longer rendered, but changed since upi placed it: left in "
         "place; remove it by hand if nothing uses it")]
    assert (site.root / GONE_BIOS).read_text().endswith("# the admin's own edit\n")


def test_a_file_another_clusters_push_recorded_is_left(runner, site) -> None:
    tftp = site.root / "var/lib/tftpboot"
    mine = json.loads((tftp / ".upi-owned.dgxpod.nvidia.com.json").read_text())
    rel = GONE_BIOS.removeprefix("var/lib/tftpboot/")
    other = {"cluster": "lab.example.com", "files": {rel: mine["files"][rel]}}
    (tftp / ".upi-owned.lab.example.com.json").write_text(json.dumps(other))
    _drop(runner, site, "worker-9")
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    assert (site.root / GONE_BIOS).is_file()
    assert rel not in json.loads((tftp / ".upi-owned.dgxpod.nvidia.com.json").read_text())["files"]


def test_a_hostile_ledger_entry_never_leads_outside_its_root(runner, site) -> None:
    tftp = site.root / "var/lib/tftpboot"
    victim = site.root / "etc/keep-me"
    victim.write_text("x\n")
    ledger = tftp / ".upi-owned.dgxpod.nvidia.com.json"
    doc = json.loads(ledger.read_text())
    sha = hashlib.sha256(b"x\n").hexdigest()  # the victim's own: only the path can keep it safe
    doc["files"]["../../../etc/keep-me"] = {"kind": "tftp", "sha256": sha}
    doc["files"][str(victim)] = {"kind": "tftp", "sha256": sha}
    ledger.write_text(json.dumps(doc))
    _drop(runner, site, "worker-0")
    assert _push(runner, site).exit_code == 0
    assert victim.read_text() == "x\n"
    assert not (site.root / GONE_UEFI).exists()


def test_check_tftp_names_a_removed_nodes_boot_file_until_the_push_removes_it(
        runner, tmp_path: Path, example_dir: Path) -> None:
    """The real dnsmasq serves the TFTP root pushed to (tests/realtftp.py); the check reads the record."""
    site = build_site(runner, tmp_path, example_dir, {"local": True})
    (tmp_path / "empty").mkdir()

    def check() -> dict[str, dict[str, str]]:
        res = runner.invoke(app, ["check", "tftp", str(site.inventory), "--server", lab_ip(), "--json",
                                  "--timeout", "0.5", "--retries", "1"])
        return {r["check"]: r for r in json.loads(res.stdout)["checks"]}

    stale = f"TFTP {GONE_BIOS.removeprefix('var/lib/tftpboot/')}"
    ledger = "TFTP .upi-owned.dgxpod.nvidia.com.json"
    with serve_tftp(tmp_path / "empty", tmp_path) as lab:
        served = lab.public / "tftp"  # the copy dnsmasq serves (Lab.start_rendered): push there
        doc = yaml.safe_load(site.inventory.read_text())
        doc["provisioner"]["tftp_root"] = str(served)
        site.inventory.write_text(yaml.safe_dump(doc))
        _drop(runner, site)
        assert _push(runner, site).exit_code == 0
        (served / "admin-notes.txt").write_text("the lab's own PXE menu lives here\n")
        doc["nodes"] = [n for n in doc["nodes"] if n["name"] != "worker-9"]
        site.inventory.write_text(yaml.safe_dump(doc))  # edited, not yet rendered nor pushed
        before = lab.inside(check)
        _drop(runner, site)
        assert _push(runner, site).exit_code == 0
        after = lab.inside(check)
        assert (served / "admin-notes.txt").is_file()
    assert before[stale]["verdict"] == "fail" and before[stale]["got"].startswith("served (")
    assert before[stale]["fix"].startswith(
        f"{stale.removeprefix('TFTP ')}: a per-MAC boot file for {BIOS_MAC}, which no node of "
        "dgxpod.yaml has; `upi push INVENTORY -o DIR` (after `upi render`) removes")
    assert ledger not in before
    assert stale not in after
    assert after[ledger]["verdict"] == "pass" and after[ledger]["got"].endswith("none stale")
    assert "TFTP admin-notes.txt" not in before  # the admin's own file is in no record: never named


def test_a_stale_file_behind_a_linked_directory_is_never_removed_through_it(runner, site) -> None:
    """worker-0's own ignition dir swapped for a link to a copy elsewhere: the copy survives the push."""
    nodes = site.root / "var/www/html/ignition/nodes"
    elsewhere = site.root / "elsewhere"
    nodes.rename(elsewhere)
    nodes.symlink_to(elsewhere)
    _drop(runner, site, "worker-0")
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    kept = [f for f in json.loads(result.output)["files"] if f["status"] == "kept"]
    assert [f["dest"] for f in kept] == [str(site.root / GONE_IGN)]
    assert "a directory on its way is a symbolic link" in kept[0]["note"]
    assert (elsewhere / "worker-0.ign").is_file()
    assert not (site.root / GONE_UEFI).exists()


def test_check_http_names_a_removed_nodes_own_ignition_until_the_push_removes_it(
        runner, tmp_path: Path, example_dir: Path) -> None:
    """The real nginx serves the pushed HTTP root (tests/realnginx.py); the check reads upi's record there."""
    require("nginx")
    site = build_site(runner, tmp_path, example_dir, {"local": True})
    doc = yaml.safe_load(site.inventory.read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != "worker-0"]
    site.inventory.write_text(yaml.safe_dump(doc))  # edited, not yet rendered nor pushed
    (tmp_path / "nginx").mkdir()

    def check(port: int) -> dict[str, dict[str, str]]:
        res = runner.invoke(app, ["check", "http", str(site.inventory), "--server", "127.0.0.1",
                                  "--port", str(port), "--json", "--timeout", "2"])
        return {r["check"]: r for r in json.loads(res.stdout)["checks"]}

    with nginx(site.root / "var/www/html", tmp_path / "nginx") as port:
        before = check(port)
        _drop(runner, site)
        assert _push(runner, site).exit_code == 0
        after = check(port)
    stale, ledger = "GET ignition/nodes/worker-0.ign", "GET .upi-owned.dgxpod.nvidia.com.json"
    assert before[stale]["verdict"] == "fail" and before[stale]["got"] == "HTTP 200"
    assert before[stale]["fix"].startswith("ignition/nodes/worker-0.ign: the own ignition of worker-0, "
                                           "which is not a node of dgxpod.yaml; `upi push")
    assert stale not in after
    assert after[ledger]["verdict"] == "pass"
    assert after[ledger]["got"].endswith(" file(s) recorded, none stale")


OLD_ROOTFS = "rhcos/rhcos-4.15.0-x86_64-live-rootfs.x86_64.img"  # beside dgxpod's 4.16.3 files
NOTES = "extras/lab-notes.txt"  # an admin's own file, published from DIR/http/ on purpose


def test_check_http_names_every_stale_file_upi_placed_until_the_push_removes_it(
        runner, tmp_path: Path, example_dir: Path) -> None:
    """Not only own ignition: any file the push recorded that the render no longer has, still served.

    The real nginx serves the pushed HTTP root (tests/realnginx.py). With -o DIR the render dir's
    http/ judges (exactly what the next push removes); without, only what the inventory tells.
    """
    from upi.ownignition import load_record

    require("nginx")
    site = build_site(runner, tmp_path, example_dir, {"local": True})
    for rel, body in ((OLD_ROOTFS, b"rootfs of RHCOS 4.15\n"), (NOTES, b"rack B is row 3\n")):
        (site.out / "http" / rel).parent.mkdir(parents=True, exist_ok=True)
        (site.out / "http" / rel).write_bytes(body)
        (site.out / "http" / rel).chmod(0o644)
    assert _push(runner, site).exit_code == 0
    (site.out / "http" / OLD_ROOTFS).unlink()  # as `upi images` drops a version no longer wanted
    with transaction(site.out) as txn:  # as `upi nodes remove -o DIR` forgets worker-0 (still listed)
        txn.commit(None, own={})
    assert load_record(site.out) == {}
    (tmp_path / "nginx").mkdir()

    def check(port: int, *extra: str) -> dict[str, dict[str, str]]:
        res = runner.invoke(app, ["check", "http", str(site.inventory), "--server", "127.0.0.1",
                                  "--port", str(port), "--json", "--timeout", "2", *extra])
        assert "Traceback" not in res.output
        return {r["check"]: r for r in json.loads(res.stdout)["checks"]}

    with nginx(site.root / "var/www/html", tmp_path / "nginx") as port:
        alone = check(port)
        with_dir = check(port, "-o", str(site.out))
        assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
        assert _push(runner, site).exit_code == 0
        after = check(port, "-o", str(site.out))
        after_alone = check(port)
    old, notes, own = f"GET {OLD_ROOTFS}", f"GET {NOTES}", "GET ignition/nodes/worker-0.ign"
    ledger = "GET .upi-owned.dgxpod.nvidia.com.json"
    # The render dir's http/ judges: the old RHCOS file and the node no longer recorded are named.
    assert {k for k, r in with_dir.items() if r["verdict"] == "fail" and k.startswith("GET ")} >= {old, own}
    assert with_dir[old]["got"] == "HTTP 200" and with_dir[old]["expected"] == "gone: no longer rendered"
    assert with_dir[old]["fix"].startswith(f"{OLD_ROOTFS}: placed by `upi push`, no longer in ")
    assert "`upi push INVENTORY -o DIR` (after `upi render`) removes" in with_dir[old]["fix"]
    assert with_dir[own]["fix"].startswith("ignition/nodes/worker-0.ign: the own ignition of worker-0, "
                                           "which own-ignition.json no longer records")
    assert notes not in with_dir and ledger not in with_dir  # DIR/http/ still publishes the notes
    # The inventory alone: the file beside its RHCOS files is named; the notes and worker-0 (a worker
    # of the inventory) are not judged.
    assert alone[old]["verdict"] == "fail"
    assert notes not in alone and own not in alone
    # The push removes both; nothing stale is left and the admin's file stays.
    assert old not in after and own not in after
    assert after[ledger]["verdict"] == "pass" and after[ledger]["got"].endswith("none stale")
    assert not (site.root / "var/www/html" / OLD_ROOTFS).exists()
    assert (site.root / "var/www/html" / NOTES).is_file()
    assert after_alone[ledger]["got"].endswith("none stale (1 only -o DIR can judge)")  # the notes


def test_a_file_flipped_to_local_boot_is_still_upis_and_goes_with_its_node(runner, site) -> None:
    """push_files (the local-boot flip) records what it placed too: the flipped file is removed, not kept."""
    from upi.inventory import load_inventory
    from upi.localboot import flip_to_disk

    before = (site.root / GONE_BIOS).read_bytes()
    flip_to_disk(site.inventory, load_inventory(site.inventory), site.out, ["worker-9"], how="test")
    assert (site.root / GONE_BIOS).read_bytes() != before  # now boots its disk
    _drop(runner, site, "worker-9")
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    statuses = {f["dest"]: f["status"] for f in json.loads(result.output)["files"]}
    assert statuses[str(site.root / GONE_BIOS)] == "removed"
    assert not (site.root / GONE_BIOS).exists()
