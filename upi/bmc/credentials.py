"""BMC credentials: a small YAML file that only its owner may read; the password never leaves memory."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FORMAT = "a YAML mapping with username: and password:"
MAX_BYTES = 64 << 10


class CredentialsError(ValueError):
    """The credentials file is missing, too open or malformed; the message never holds its content."""


@dataclass(frozen=True)
class Credentials:
    """A BMC user and password (the password is left out of repr, so no log or traceback shows it)."""

    username: str
    password: str = field(repr=False)


def check_mode(path: Path) -> None:
    """Refuse a credentials file that anyone but its owner can read or write (or that is not a file)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CredentialsError(f"{path} is not a regular file")
    loose = stat.S_IMODE(st.st_mode) & 0o077
    if loose:
        raise CredentialsError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}: group or others can reach the BMC "
            f"password; run `chmod 600 {path}`")


def read_credentials(path: Path) -> Credentials:
    """The username and password in `path`, after checking that only its owner can read it."""
    from upi.errors import UpiError
    from upi.safefs import read_named_file

    check_mode(path)
    try:
        raw = read_named_file(path, MAX_BYTES)  # a FIFO or a device never hangs the read
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UpiError as exc:
        raise CredentialsError(str(exc)) from None
    try:
        doc = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        # Never the parser's message: it quotes the text, which holds the password.
        raise CredentialsError(f"{path} is not {FORMAT}") from None
    if not isinstance(doc, dict):
        raise CredentialsError(f"{path} is not {FORMAT}")
    unknown = sorted(str(k) for k in doc if k not in ("username", "password"))
    user, password = doc.get("username"), doc.get("password")
    if unknown:
        raise CredentialsError(f"{path}: unknown key(s) {', '.join(unknown)}; want {FORMAT}")
    if not isinstance(user, str) or not user or ":" in user:
        raise CredentialsError(f"{path}: username is missing or not a plain name (no ':')")
    if not isinstance(password, str) or not password:
        # YAML reads 0123 as 83 and yes as true: a password is written in quotes, never guessed.
        raise CredentialsError(f"{path}: password is missing, empty or not text (write it in quotes)")
    return Credentials(user, password)
