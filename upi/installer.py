"""openshift-install: find it, run it with its output streamed, explain how it failed.

`upi ignition` runs `create manifests` and `create ignition-configs`;
`upi wait` runs `wait-for bootstrap-complete` and `wait-for install-complete`
through the same `Installer.run`, and reads the same exit-code table.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upi.errors import CommandError, UsageError
from upi.installer_log import display, parse_line
from upi.inventory.model import Inventory
from upi.runner import Streamed, run, stream
from upi.safefs import kind_of

PROGRAM = "openshift-install"
ENV_VAR = "UPI_OPENSHIFT_INSTALL"
MIRROR = "https://mirror.openshift.com/pub/openshift-v4/clients/ocp"

# cmd/openshift-install exit codes (current releases; older ones exit 1 on any failure).
EXIT_MEANINGS: Mapping[int, str] = {
    0: "success",
    1: "fatal error",
    3: "install-config error",
    4: "infrastructure failed",
    5: "bootstrap failed",
    6: "install failed",
    7: "cluster operators not stable",
    8: "interrupted",
}
# Lines the installer writes when something goes wrong (logrus text format).


def exit_meaning(returncode: int | None) -> str:
    """What an openshift-install exit code means (None: upi stopped it at a deadline)."""
    if returncode is None:
        return "timed out: upi stopped it"
    return EXIT_MEANINGS.get(returncode, f"unknown exit code {returncode}")


class InstallerNotFound(UsageError):
    """openshift-install is not where upi looked: exit 2, nothing was run."""


class InstallerFailed(CommandError):
    """openshift-install exited non-zero: its exit meaning and its last error lines."""

    def __init__(self, argv: Sequence[str], returncode: int | None, tail: Sequence[str]) -> None:
        super().__init__(argv, returncode, "\n".join(tail))
        self.meaning = exit_meaning(returncode)
        self.error_lines = error_lines(tail)
        sub = argv[3:] if len(argv) > 2 and argv[1] == "--dir" else argv[1:]
        what = " ".join(sub)
        code = "was stopped" if returncode is None else f"exited {returncode}"
        lines = "".join(f"\n  {line}" for line in self.error_lines)
        self.args = (f"openshift-install {what} {code} ({self.meaning}){lines}",)


def error_lines(tail: Sequence[str], limit: int = 10) -> list[str]:
    """The installer's last error/fatal lines; failing that, its last 5 lines."""
    errors = [display(line) for line in tail if parse_line(line).level in ("error", "fatal")]
    return errors[-limit:] if errors else [display(line) for line in tail[-5:]]


def _mirror_hint(version: str | None) -> str:
    channel = f"stable-{version}" if version else "stable"
    return (f"download openshift-install-linux.tar.gz for the cluster's version from "
            f"{MIRROR}/{channel}/ (or `oc adm release extract --command=openshift-install`), "
            f"then pass --openshift-install PATH, set {ENV_VAR}, or put it on PATH")


def _checked(path: Path, source: str) -> Path:
    """`path`, absolute, if it is an executable file; else InstallerNotFound saying which it is not.

    Absolute, because `./openshift-install` is Path('openshift-install'),
    which a child process would look up on PATH, not in the current directory.
    """
    path = path if path.is_absolute() else Path.cwd() / path  # a symlink keeps its name
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InstallerNotFound(f"{source}: {path} does not exist") from None
    except OSError as exc:
        raise InstallerNotFound(f"{source}: {path} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InstallerNotFound(f"{source}: {path} is {kind_of(mode)}, not a program file")
    if not os.access(path, os.X_OK):
        raise InstallerNotFound(f"{source}: {path} is not executable (chmod +x it)")
    return path


def locate(explicit: Path | None = None, *, version: str | None = None,
           environ: Mapping[str, str] | None = None) -> Path:
    """openshift-install from `--openshift-install`, else $UPI_OPENSHIFT_INSTALL, else PATH.

    `version` (the inventory's openshift_version) only improves the message
    when the program is nowhere to be found.
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        return _checked(explicit.expanduser(), "--openshift-install")
    if env.get(ENV_VAR):
        return _checked(Path(env[ENV_VAR]).expanduser(), ENV_VAR)
    found = shutil.which(PROGRAM, path=env.get("PATH", os.defpath))
    if found:
        return Path(found)
    raise InstallerNotFound(
        f"{PROGRAM} not found: --openshift-install was not given, {ENV_VAR} is not set, "
        f"and no {PROGRAM} is on PATH; {_mirror_hint(version)}")


def pull_secret_fragments(pull_secret: str) -> tuple[str, ...]:
    """Every form in which the pull secret could show up in a line of output.

    The whole document (as written, compact, and escaped the way Go's %q and
    JSON quote it: the installer's validation errors print it that way, once
    or twice), base64-encoded (an ignition file or a Secret carries it so),
    and each credential inside it on its own: the `auth` values, what they
    decode to (`user:password`) and the password alone.
    """
    raw = pull_secret.strip()
    texts = {raw, pull_secret}
    try:
        doc = json.loads(pull_secret)
    except ValueError:
        doc = None
    creds: set[str] = set()
    if doc is not None:
        compact = json.dumps(doc, separators=(",", ":"))
        texts.add(compact)
        creds = set(_strings(doc.get("auths") if isinstance(doc, dict) else None))
        creds |= {part for value in list(creds) for part in _decoded_auth(value)}
    forms: set[str] = set()
    for text in texts | creds:
        once = _go_quoted(text)
        # Quoted once by field.Invalid, and once more by logrus when stderr is not a terminal.
        forms |= {text, once, _go_quoted(once)}
    for text in texts | creds:
        forms |= set(base64_cores(text.encode()))
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for key, value in node.items() if key != "email" for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


def _go_quoted(text: str) -> str:
    """`text` inside a JSON string as Go's encoding/json writes it (<, > and & escaped too)."""
    quoted = json.dumps(text)[1:-1]
    return quoted.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _decoded_auth(value: str) -> tuple[str, ...]:
    """An `auth` value is base64 of `user:password`: that, and the password alone."""
    try:
        text = base64.b64decode(value, validate=True).decode()
    except ValueError:  # not base64, or not UTF-8 (binascii.Error is a ValueError)
        return ()
    user, sep, password = text.partition(":")
    return (text, password) if sep else (text,)


def base64_cores(data: bytes) -> tuple[str, ...]:
    """The base64 characters that stand for `data` alone, wherever it starts in an encoded stream.

    Encoded from an offset of 0, 1 or 2 bytes (mod 3) the same bytes give
    three different texts; the characters that mix in a neighbour's bits
    are dropped from each. Standard and URL-safe alphabets.
    """
    out = []
    for pad in range(3):
        text = base64.b64encode(b"\0" * pad + data).decode()
        start, end = -(-8 * pad // 6), 8 * (pad + len(data)) // 6
        core = text[start:end]
        out += [core, core.replace("+", "-").replace("/", "_")]
    return tuple(out)


@dataclass(frozen=True)
class Installer:
    """One openshift-install binary working on one assets directory."""

    binary: Path
    assets: Path
    secrets: tuple[str, ...] = ()

    def run(self, *args: str, on_line: Callable[[str], None], timeout: float | None = None,
            check: bool = True, env: Mapping[str, str] | None = None) -> Streamed:
        """`openshift-install --dir ASSETS ARGS...`, each line (redacted) to `on_line`.

        Raises InstallerFailed on a non-zero exit (unless `check` is false:
        then the exit code is in the result) and when `timeout` passes; on
        Ctrl-C the installer is stopped and KeyboardInterrupt propagates.
        """
        argv = [str(self.binary), "--dir", str(self.assets), *args]
        try:
            result = stream(argv, on_line=on_line, timeout=timeout, secrets=self.secrets, env=env)
        except CommandError as exc:
            if exc.returncode == 127:
                raise InstallerNotFound(str(exc)) from None
            raise InstallerFailed(argv, exc.returncode, exc.stderr.splitlines()) from None
        if check and result.returncode != 0:
            raise InstallerFailed(argv, result.returncode, result.tail)
        return result

    def version(self) -> str:
        """`openshift-install <version>`, e.g. `openshift-install 4.16.3`.

        The installer's first line starts with its argv[0], the path it was
        run as; that path is replaced by the program's name.
        """
        out = run([self.binary, "version"], timeout=60).stdout
        return version_line(out.splitlines()[0] if out.strip() else "")


def version_line(first_line: str) -> str:
    """`/usr/local/bin/openshift-install 4.19.0` -> `openshift-install 4.19.0`."""
    words = first_line.strip().rsplit(None, 1)
    return f"{PROGRAM} {words[-1]}" if len(words) == 2 else PROGRAM


def release_of(version_line: str) -> tuple[int, int] | None:
    """(major, minor) from `openshift-install 4.16.3`; None when it does not say."""
    match = re.search(r"\b(\d+)\.(\d+)\.\d+", version_line)
    return (int(match[1]), int(match[2])) if match else None


def version_warnings(inv: Inventory, version_line: str) -> list[str]:
    """A warning when the installer is for another OpenShift minor than the inventory says."""
    release = release_of(version_line)
    if release is None or release == inv.cluster.version:
        return []
    return [f"{version_line} is for OpenShift {'.'.join(map(str, release))} but the inventory says "
            f"OpenShift {inv.cluster.openshift_version}: the RHCOS images and network type may not "
            "match"]
