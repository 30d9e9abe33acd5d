"""What `upi images` pays to tell a damaged staged file from an intact one (issue 24).

Two ways to know a staged RHCOS file still holds its recorded bytes:

- hash it again at every run (sha256 of the whole file: the rootfs is ~1 GiB);
- trust the record while the file's fingerprint (inode, mtime, ctime: one
  lstat) is the one recorded, and hash again only when it changed.

`python bench/images_verify.py [--size-mib 1024] [--dir DIR]` writes a file
of that size, then times both: the hash twice (the first read may come from
disk, the second from the page cache) and the lstat 1,000 times. The file is
removed at the end. No goal: it prints the figures the choice rests on
(docs/security.md, "A damaged staged file can be repaired").
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from upi.images.stage import fingerprint
from upi.safefs import sha256_fd


def _hash(path: Path) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        sha256_fd(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "rhcos-live-rootfs.x86_64.img"
        block = os.urandom(1 << 20)
        with path.open("wb") as fh:
            for _ in range(args.size_mib):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the first hash reads from disk
        os.close(fd)
        first, second = _hash(path), _hash(path)
        start = time.perf_counter()
        for _ in range(1000):
            fingerprint(path.lstat())
        lstat = (time.perf_counter() - start) / 1000
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.size_mib} MiB file, load {load}: sha256 {first:.2f} s (first read), "
              f"{second:.2f} s (cached); fingerprint (lstat) {lstat * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
