"""`upi status` judges a day-2 node's own ignition fetch by the copy `upi nodes add` recorded.

A node `upi nodes add` joined fetches ignition/nodes/NAME.ign; the record
in DIR (own-ignition.json) says which copies are upi's: a GET that sent
fewer bytes than that copy was cut. A copy put there by hand is never
published, so it judges nothing.
"""

from __future__ import annotations

from pathlib import Path

from test_status import CAUSES, _clf, _node, _status

from upi.ownignition import with_nodes
from upi.render import RenderedFile
from upi.renderdir import transaction

ROOTFS = "/rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"


def test_a_cut_fetch_of_a_recorded_own_ignition_is_no_fetch_and_a_hand_copy_judges_nothing(
        runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with transaction(out) as txn:  # as `upi nodes add` publishes worker-0's own ignition
        txn.commit(None, own=with_nodes(txn.records.own, ["worker-0"]),
                   published=[RenderedFile("http/ignition/nodes/worker-0.ign", b"x" * 1000, 0o600)])
    (out / "http/ignition/nodes/worker-1.ign").write_bytes(b"y" * 1000)  # copied in by hand
    access = tmp_path / "access.log"
    access.write_text(
        f'10.33.3.44 - - [{_clf()}] "GET {ROOTFS} HTTP/1.1" 200 4096\n'
        f'10.33.3.44 - - [{_clf()}] "GET /ignition/nodes/worker-0.ign HTTP/1.1" 200 999\n'
        f'10.33.3.46 - - [{_clf()}] "GET {ROOTFS} HTTP/1.1" 200 4096\n'
        f'10.33.3.46 - - [{_clf()}] "GET /ignition/nodes/worker-1.ign HTTP/1.1" 200 999\n')
    args = ["--dnsmasq-log", "/dev/null", "--access-log", str(access), "--stuck-after", "0", "--json"]
    _, doc = _status(runner, "-o", str(out), *args)
    w0 = _node(doc, "worker-0")
    assert w0["current"] == "rootfs" and not w0["stages"]["ignition"]["reached"]
    assert w0["causes"][0].startswith("its ignition file was cut after 999 of 1000 bytes (HTTP 200)")
    assert w0["causes"][1:] == list(CAUSES["ignition"])
    assert _node(doc, "worker-1")["current"] == "ignition"  # its size is not known: not judged
