"""A writer of a render directory in a process of its own, for tests/test_renderdir_concurrency.py.

    python tests/renderdir_writers.py KIND INVENTORY [ARG]

KIND is `render` (`upi render INV -o DIR`), `flip` (upi.localboot.flip_to_disk
of node ARG, not pushed: what `upi wait` does as a metal worker joins) or
`images` (`upi images INV -o DIR --from ARG`). It reads one DIR per line on
stdin, waits for `go` on the next line (the test sends both writers' `go` at
once, so the two write DIR at the same moment), writes, and answers
`ok` or `failed: <output>` on stdout. One process serves every round: the
interpreter starts once, not 2 x 20 times per pair.
"""

from __future__ import annotations

import sys
from pathlib import Path

from typer.testing import CliRunner

from upi.cli import app
from upi.inventory import load_inventory
from upi.localboot import flip_to_disk


def main(kind: str, inventory: Path, arg: str) -> None:
    runner = CliRunner()
    inv = load_inventory(inventory)
    for line in sys.stdin:
        out = Path(line.strip())
        if sys.stdin.readline().strip() != "go":
            return
        failed = ""
        if kind == "flip":
            try:
                flip_to_disk(inventory, inv, out, [arg], how="Node registered", push=False)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
                failed = f"{type(exc).__name__}: {exc}"
        else:
            argv = [kind, str(inventory), "-o", str(out)] + (["--from", arg] if kind == "images" else [])
            res = runner.invoke(app, argv)
            failed = "" if res.exit_code == 0 else f"exit {res.exit_code}: {res.output}{res.exception!r}"
        print("ok" if not failed else "failed: " + " ".join(failed.split()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
