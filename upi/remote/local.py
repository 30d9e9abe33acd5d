"""The machine upi runs on, as a push target: the runner, no shell, no SSH."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from upi.errors import CommandError
from upi.remote.base import SBIN_DIRS, copy_into
from upi.runner import Result, run


class LocalTransport:
    """Runs programs through upi.runner and writes files directly."""

    def __init__(self, command_timeout: float = 60.0) -> None:
        self.command_timeout = command_timeout
        path = os.environ.get("PATH", "")
        self._env = {**os.environ, "PATH": os.pathsep.join([path, *SBIN_DIRS])}

    @property
    def name(self) -> str:
        """Always `local`."""
        return "local"

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Result:
        """Run `argv` here; a missing program is exit 127, as a shell would say."""
        limit = timeout or self.command_timeout
        try:
            return run(argv, timeout=limit, check=False, env=self._env)
        except CommandError as exc:
            if exc.returncode == 127:
                return Result(tuple(argv), 127, "", exc.stderr)
            raise

    def write_file(self, path: str, content: bytes | Path, mode: int) -> None:
        """Write `path` created with `mode` (a secret is never readable by others, even briefly)."""
        target = Path(path)
        target.unlink(missing_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as fh:
            copy_into(fh, content)
            fh.flush()
            os.fsync(fh.fileno())
        target.chmod(mode)  # umask may have trimmed it

    def close(self) -> None:
        """Nothing to release."""
