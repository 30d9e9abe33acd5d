"""The JSON records upi keeps beside a render (DIR/installed.json, DIR/own-ignition.json), read safely.

Each record is a file of the render dir's commit (upi.renderdir.transaction),
read here through the render dir's `Tree`: never through a link (it could
lead out of DIR), never a FIFO or a directory, never more than MAX_RECORD
bytes. A writer reads under DIR's lock (`read`); a reader such as status or
wait reads without it (`load`). Each record module parses the bytes itself:
a malformed record is an error there, never "empty".
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from upi.errors import RenderError
from upi.render import PUBLIC, RenderedFile
from upi.safefs import Tree, UnsafePath, kind_of, shown

MAX_RECORD = 16 << 20


def read(tree: Tree, name: str, what: str) -> bytes | None:
    """DIR/NAME's bytes read through `tree` (None when absent); `what` names the record in errors.

    A link, a FIFO or a directory there is refused (UnsafePath, exit 2): it
    is not a record upi wrote.
    """
    st = tree.lstat(name)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(f"{shown(tree.root / name)} is {kind_of(st.st_mode)}, not {what}: "
                         "upi never follows or reads it; remove it")
    try:
        raw = tree.read(name, MAX_RECORD)
    except OSError as exc:
        raise RenderError(f"cannot read {shown(tree.root / name)}: {exc.strerror or exc}") from None
    if raw is None:  # replaced between lstat and open
        raise RenderError(f"{shown(tree.root / name)} changed while upi read it; run this again")
    return raw


def load(out: Path, name: str, what: str) -> bytes | None:
    """`read` for a reader without DIR's lock (None when DIR or the record does not exist)."""
    try:
        tree = Tree.open(out)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RenderError(f"cannot read {shown(out / name)}: {exc.strerror or exc}") from None
    with tree:
        return read(tree, name, what)


def record_file(name: str, doc: dict[str, Any]) -> RenderedFile:
    """A record as a file of the render dir's commit (written with the files it describes)."""
    return RenderedFile(name, (json.dumps(doc, indent=2) + "\n").encode(), PUBLIC)
