"""Output helpers: tables for people, JSON for scripts, errors on stderr.

Also the log level (`upi --log-level`, `-v`): warnings, progress lines and
debug lines on stderr are shown or not by it, and library modules log
through the standard `logging` module under the `upi` logger, which the
same level governs. Errors are always shown.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TextIO

# Control characters a terminal acts on (ESC sequences, CR overwriting a line,
# C1 CSI), and the bidi overrides that reorder what is shown: never printed raw.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    r"""`text` with terminal control characters shown as escapes (ESC as `\x1b`); tabs, newlines kept."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def shown_name(name: str) -> str:
    """A node name from the command line for a message: as typed, or quoted and cut short.

    Quoted when it does not read as a name: empty, or holding a newline that
    would split the one-line error.
    """
    if name and name.isprintable() and name.isascii() and len(name) <= 63 and " " not in name:
        return name
    return repr(name[:60] + "..." if len(name) > 60 else name)


def plain(value: object) -> Any:
    """A rich Text of `value`: shown as written, never read as markup (`[bold]`), no raw escapes."""
    from rich.text import Text

    return Text(printable(str(value)))


# The names `--log-level` takes, most verbose first, with the logging level each means.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
DEFAULT_LEVEL = "info"


class _State:
    level = LEVELS[DEFAULT_LEVEL]
    json_printed = False
    json_lines = False  # the command streams one JSON object per line (approve-csr --json)
    done = False  # the command finished and left nothing to clean up (finished())


_state = _State()


class _Stderr(logging.Handler):
    """Writes `upi` log records to the current sys.stderr (a test may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        level = "warning" if record.levelno == logging.WARNING else record.levelname.lower()
        sys.stderr.write(f"upi: {level}: {printable(record.getMessage())}\n")


_LOG = logging.getLogger("upi")
_LOG.addHandler(_Stderr())
_LOG.propagate = False


def set_level(name: str) -> None:
    """Show messages of level `name` (debug, info, warn, error) and above from now on."""
    _state.level = LEVELS[name]
    _LOG.setLevel(LEVELS[name])


_ALIASES = {"warning": "warn", "fatal": "error"}  # the installer's (logrus) names


def shows(name: str) -> bool:
    """True when messages of level `name` are shown at the current log level."""
    return LEVELS[_ALIASES.get(name, name)] >= _state.level


def log_level() -> str:
    """The current log level's name."""
    return next(n for n, v in LEVELS.items() if v == _state.level)


set_level(DEFAULT_LEVEL)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (one line of it when the command streams JSON lines)."""
    _state.json_printed = True
    if _state.json_lines:
        sys.stdout.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
        return
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def print_json_line(line: str) -> None:
    """One already-encoded JSON object as one line; an error after it is one line too."""
    _state.json_lines = True
    sys.stdout.write(printable(line) + "\n")
    sys.stdout.flush()


def json_printed() -> bool:
    """True once this run printed its JSON document (an error then adds none on stdout).

    A stream of JSON lines is no one document: an error after it is one more line.
    """
    return _state.json_printed and not _state.json_lines


def reset_output() -> None:
    """Forget what the previous command printed (one process may run several, as tests do)."""
    _state.json_printed = _state.json_lines = _state.done = False


def finished() -> None:
    """The command succeeded and started no thread, child or temp file: teardown may be skipped.

    Freeing every object of a 20,000-node render one by one at exit takes
    about as long as writing its files; `upi.cli.main` ends such a process at once.
    """
    _state.done = True


def is_finished() -> bool:
    """True once the command called finished()."""
    return _state.done


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table on stdout: drawn by rich on a terminal, aligned plain text into a pipe or file.

    Piped output goes to grep, awk or a file: columns without box drawing,
    and no rich import or layout pass (seconds for 5,000 rows).
    """
    if not sys.stdout.isatty():
        _plain_table(title, columns, rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=plain(title) if title else None, title_justify="left", show_lines=False)
    for col in columns:
        table.add_column(plain(col))
    for row in rows:
        table.add_row(*(plain(c) for c in row))
    Console(soft_wrap=False).print(table)


def _plain_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Header and rows, columns two spaces apart, padded to the widest cell (as `column -t`)."""
    cells = [[printable(c) for c in columns]]
    for row in rows:
        texts = [str(c) for c in row]
        joined = "".join(texts)  # one scan per row: escaping cell by cell is rarely needed
        if "\n" in joined or _UNPRINTABLE.search(joined):
            texts = [printable(t).replace("\n", " ") for t in texts]
        cells.append(texts)
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(columns))]
    lines = [printable(title)] if title else []
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    sys.stdout.write("\n".join(lines) + "\n")


def say(message: str) -> None:
    """A line for the user on stdout."""
    sys.stdout.write(printable(message) + "\n")


def warn(message: str) -> None:
    """A warning on stderr (hidden at `--log-level error`)."""
    if shows("warn"):
        sys.stderr.write(f"upi: warning: {printable(message)}\n")


def progress(message: str) -> None:
    """A progress line on stderr (hidden at `--log-level warn` and `error`)."""
    if shows("info"):
        sys.stderr.write(printable(message) + "\n")


def error(message: str) -> None:
    """An error on stderr."""
    sys.stderr.write(f"upi: error: {printable(message)}\n")


def say_err(message: str) -> None:
    """A line on stderr (continuation of an error)."""
    sys.stderr.write(printable(message) + "\n")


@contextlib.contextmanager
def transfer_progress() -> Iterator[Callable[[str, int, int | None], None]]:
    """A progress bar per file on a terminal (stderr); without a terminal, nothing at all.

    Yields `update(name, done_bytes, total_bytes_or_None)`.
    """
    if not sys.stderr.isatty():
        yield lambda name, done, total: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        tasks: dict[str, Any] = {}

        def update(name: str, done: int, total: int | None) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(printable(name), total=total)
            bar.update(tasks[name], completed=done, total=total)

        yield update


class LiveRegion:
    """A rich Live region on `out` while the view is entered, if `_live_wanted` (a terminal).

    The live views (upi wait, upi gpu, upi status --watch) set `out`,
    `_live_wanted` and `_live = None`, and say how the region draws
    (`_live_options`: a renderable to poll, or updates they push).
    """

    out: TextIO
    _live_wanted: bool
    _live: Any

    def _live_options(self) -> dict[str, Any]:
        return {"auto_refresh": False}  # the view pushes each update itself

    def __enter__(self) -> Self:
        if self._live_wanted:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.out), transient=False, **self._live_options())
            self._live.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()



def duration_text(seconds: float) -> str:
    """`seconds` as a duration the options accept (3600 -> `1h`, 90 -> `1m30s`, 0.5 -> `0.5s`)."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
