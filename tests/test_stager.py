"""The first render's staging dir, filled by a forked child while the render goes on (upi.staging.Stager).

Each case runs in a fresh interpreter: a process running threads never forks
(finish() then writes everything), and a test process may have threads left
by another test, so only a process of our own says for sure which path ran.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from upi.staging import STAGING_PREFIX

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import json, os, sys, threading
from pathlib import Path
from upi.render import RenderedFile
from upi.safefs import Tree
from upi.staging import Stager, roll_forward

forks = []
_fork = os.fork
def fork():
    pid = _fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = fork
out = Path(sys.argv[1])
out.mkdir()
tree = Tree.open(out)
"""


def run(tmp_path: Path, body: str) -> dict:
    """Run PRELUDE + `body` in a new interpreter on DIR tmp_path/out; the JSON it prints last."""
    script = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def tree_of(out: Path) -> dict[str, tuple[str, int]]:
    return {p.relative_to(out).as_posix(): (p.read_text(), stat.S_IMODE(p.stat().st_mode))
            for p in out.rglob("*") if p.is_file()}


def test_child_writes_what_it_was_fed_and_finish_the_rest(tmp_path: Path) -> None:
    """Fed files come from the child; finish adds, rewrites and drops to match the final list."""
    doc = run(tmp_path, """
        fed = [RenderedFile(f"tftp/pxelinux.cfg/01-{i:04x}", f"boot {i}\\n".encode(), 0o644)
               for i in range(600)]
        fed.append(RenderedFile("secrets/key", b"s3cret\\n", 0o600))
        fed.append(RenderedFile("dropped/later", b"x\\n", 0o644))
        with Stager(tree) as stager:
            stager.feed(fed)
            forked = len(forks)
            final = [f for f in fed if f.path != "dropped/later"]
            final[0] = RenderedFile(final[0].path, b"rendered again\\n", 0o644)  # differs from the fed one
            final.append(RenderedFile("manifest.json", b"{}\\n", 0o644))
            name, journal = stager.finish(final, [])
        roll_forward(tree, name, journal)
        print(json.dumps({"forked": forked, "left": sorted(os.listdir(out))}))
    """)
    assert doc["forked"] == 1
    got = tree_of(tmp_path / "out")
    assert got["tftp/pxelinux.cfg/01-0000"] == ("rendered again\n", 0o644)
    assert got["tftp/pxelinux.cfg/01-0257"] == ("boot 599\n", 0o644)
    assert got["secrets/key"] == ("s3cret\n", 0o600)
    assert got["manifest.json"] == ("{}\n", 0o644)
    assert "dropped/later" not in got
    assert len(got) == 602
    assert not [n for n in doc["left"] if n.startswith(STAGING_PREFIX)]


# The child fails on its second file: "a" is a file where "a/b" needs a directory.
CHILD_FAILS = """
fed = [RenderedFile("a", b"file\\n", 0o644), RenderedFile("a/b", b"under a file\\n", 0o644)]
try:
    with Stager(tree) as stager:
        stager.feed(fed)
        ENDING
except BaseException as exc:
    raised = [type(exc).__name__, str(exc)]
print(json.dumps({"forked": len(forks), "raised": raised, "left": os.listdir(out)}))
"""


@pytest.mark.parametrize(("ending", "raised", "says"), [
    # finish() raises what stopped the child, its type kept (Tree.create's UnsafePath).
    ("stager.finish(fed, [])", "UnsafePath", "not a directory"),
    # A render that fails after the child failed: the render's error is the one raised.
    ("os.waitid(os.P_PID, forks[0], os.WEXITED | os.WNOWAIT); raise RuntimeError('the render failed')",
     "RuntimeError", "the render failed"),
])
def test_a_failed_child_leaves_nothing_and_the_right_error_is_raised(
        tmp_path: Path, ending: str, raised: str, says: str) -> None:
    doc = run(tmp_path, CHILD_FAILS.replace("ENDING", ending))
    assert doc["forked"] == 1
    assert doc["raised"][0] == raised, doc
    assert says in doc["raised"][1]
    assert doc["left"] == []


def test_leaving_without_finish_kills_the_child_and_removes_the_dir(tmp_path: Path) -> None:
    """A render error or a refusal after feed: the child is stopped and reaped, DIR is as it was."""
    doc = run(tmp_path, """
        import time
        (out / "keep.txt").write_text("mine\\n")
        fed = [RenderedFile(f"many/{i}", b"x" * 4096, 0o644) for i in range(4000)]
        try:
            with Stager(tree) as stager:
                stager.feed(fed)
                raise RuntimeError("the render failed")
        except RuntimeError:
            pass
        try:
            os.waitpid(-1, os.WNOHANG)
            zombie = True
        except ChildProcessError:
            zombie = False
        print(json.dumps({"forked": len(forks), "left": sorted(os.listdir(out)), "zombie": zombie}))
    """)
    assert doc["forked"] == 1
    assert doc["left"] == ["keep.txt"]
    assert doc["zombie"] is False


def test_a_process_running_threads_never_forks(tmp_path: Path) -> None:
    """fork() copies only the calling thread: with another thread alive, finish writes everything."""
    doc = run(tmp_path, """
        stop = threading.Event()
        waiter = threading.Thread(target=stop.wait)
        waiter.start()
        fed = [RenderedFile(f"f/{i}", f"{i}\\n".encode(), 0o644) for i in range(50)]
        with Stager(tree) as stager:
            stager.feed(fed)
            name, journal = stager.finish(fed, [])
        roll_forward(tree, name, journal)
        stop.set()
        waiter.join()
        print(json.dumps({"forked": len(forks)}))
    """)
    assert doc["forked"] == 0
    assert len(tree_of(tmp_path / "out")) == 50


def test_no_process_slot_for_a_child_means_finish_writes_it_all(tmp_path: Path) -> None:
    """fork() failing (EAGAIN: a cgroup's pids.max, ENOMEM) is no error: the files are written here."""
    doc = run(tmp_path, """
        import errno
        def no_fork():
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        os.fork = no_fork
        fed = [RenderedFile(f"f/{i}", f"{i}\\n".encode(), 0o640) for i in range(20)]
        before = len(os.listdir("/proc/self/fd"))
        with Stager(tree) as stager:
            stager.feed(fed)
            name, journal = stager.finish(fed, [])
        after = len(os.listdir("/proc/self/fd"))
        roll_forward(tree, name, journal)
        print(json.dumps({"fds": [before, after]}))
    """)
    assert doc["fds"][0] == doc["fds"][1]  # the pipe made for the child is closed again
    got = tree_of(tmp_path / "out")
    assert got == {f"f/{i}": (f"{i}\n", 0o640) for i in range(20)}


@pytest.mark.parametrize("nodes", [3, 300])
def test_a_first_render_by_the_command_equals_one_written_without_the_child(
        tmp_path: Path, nodes: int) -> None:
    """`python -m upi render` (the child writes the per-MAC files) against the same render, unforked."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import render as bench_render
    finally:
        sys.path.pop(0)
    work = tmp_path / "inv"
    work.mkdir()
    inv = work / "inv.yaml"
    inv.write_text(bench_render.inventory(nodes))
    for name in ("pull-secret.json", "id_rsa.pub"):
        shutil.copy(ROOT / "inventories" / name, work / name)
    forked = tmp_path / "forked"
    proc = subprocess.run([sys.executable, "-m", "upi", "render", str(inv), "-o", str(forked)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    plain = tmp_path / "plain"
    script = textwrap.dedent("""
        import sys, threading
        from pathlib import Path
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()  # no fork: finish writes it all
        from upi.renderdir import render
        render(Path(sys.argv[1]), Path(sys.argv[2]))
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(inv), str(plain)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert tree_of(forked) == tree_of(plain)
    assert len([p for p in tree_of(forked) if "01-" in p]) >= nodes - 1
    assert not [n for n in os.listdir(forked) if n.startswith(STAGING_PREFIX)]


def test_a_refused_first_render_leaves_dir_as_it_was(tmp_path: Path) -> None:
    """Files upi did not write, no --force: exit 2 after the child wrote; nothing of it stays."""
    from conftest import inventory_path

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the admin's\n")
    proc = subprocess.run([sys.executable, "-m", "upi", "render", str(inventory_path("dgxpod")), "-o",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "notes.txt" in proc.stderr
    assert sorted(os.listdir(out)) == ["notes.txt"]
