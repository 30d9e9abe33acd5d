"""`pytest --group-times`: how long each group of test files takes (docs/testing.md's table).

A group is the word after `test_` in the file name (`test_check_dns.py` is
`check`); a group of one file is counted under "other". Each test's time is
its setup, call and teardown as pytest measured them, in whichever process
ran it (under xdist the reports reach the controller, which sums them), so
with two processes the sum is more than the wall time.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

_seconds: dict[str, float] = defaultdict(float)
_tests: dict[str, set[str]] = defaultdict(set)


def group_of(path: str) -> str:
    """`tests/test_check_dns.py` -> `check`; a file without a word after test_ is its own name."""
    name = path.rsplit("/", 1)[-1]
    match = re.match(r"test_([a-z0-9]+)", name)
    return match.group(1) if match else name


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--group-times", action="store_true", default=False,
                     help="print the seconds each group of test files took (docs/testing.md)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _seconds[path] += report.duration
    _tests[path].add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not config.getoption("--group-times") or not _seconds:
        return
    files: dict[str, list[str]] = defaultdict(list)
    for path in _seconds:
        files[group_of(path)].append(path)
    rows: dict[str, tuple[int, int, float]] = defaultdict(lambda: (0, 0, 0.0))
    for group, paths in files.items():
        key = group if len(paths) > 1 else "other"
        n_files, n_tests, secs = rows[key]
        rows[key] = (n_files + len(paths), n_tests + sum(len(_tests[p]) for p in paths),
                     secs + sum(_seconds[p] for p in paths))
    write = terminalreporter.write_line
    write("")
    write("| group: `tests/test_...` | files | tests | seconds |")
    write("|---|---:|---:|---:|")
    for key in sorted(rows, key=lambda k: (k == "other", k)):
        n_files, n_tests, secs = rows[key]
        label = "other" if key == "other" else f"`{key}_*`"
        write(f"| {label} | {n_files} | {n_tests} | {secs:.0f} |")
    total = sum(r[2] for r in rows.values())
    write(f"| **all** | **{len(_seconds)}** | **{sum(r[1] for r in rows.values())}** | **{total:.0f}** |")
    slow = sorted(_seconds.items(), key=lambda kv: -kv[1])[:10]
    write("slowest files: " + ", ".join(f"{p.rsplit('/', 1)[-1]} {s:.0f} s" for p, s in slow))
