"""Check results: one row per probe (check, expected, got, verdict) and a fix."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from upi import console

Verdict = Literal["pass", "warn", "fail"]
# Beyond this many rows the table shows only what needs attention.
FULL_TABLE_ROWS = 200


@dataclass(frozen=True)
class CheckResult:
    """One probe's outcome; `fix` is a one-line instruction when it did not pass."""

    area: str
    check: str
    expected: str
    got: str
    verdict: Verdict
    fix: str = ""


@dataclass
class Report:
    """Every result of one `upi check` run, in probe order."""

    results: list[CheckResult] = field(default_factory=list)

    def extend(self, results: Iterable[CheckResult]) -> None:
        """Add results (another area's, for `check all`)."""
        self.results.extend(results)

    @property
    def counts(self) -> dict[Verdict, int]:
        """How many results have each verdict."""
        c = Counter(r.verdict for r in self.results)
        return {"pass": c["pass"], "warn": c["warn"], "fail": c["fail"]}

    @property
    def failed(self) -> int:
        """Number of failed probes (any makes the command exit 1)."""
        return self.counts["fail"]

    def summary(self) -> str:
        """`12 checks: 10 passed, 1 warning, 1 failed`."""
        n, total = self.counts, len(self.results)
        return (f"{total} check{'' if total == 1 else 's'}: {n['pass']} passed, {n['warn']} "
                f"warning{'' if n['warn'] == 1 else 's'}, {n['fail']} failed")

    def to_json(self) -> dict[str, Any]:
        """The report for scripts: every row, the counts and `ok`."""
        return {"ok": self.failed == 0, "counts": self.counts,
                "checks": [asdict(r) for r in self.results]}


def show(report: Report, *, as_json: bool) -> None:
    """Print the report: JSON on stdout, or a table followed by one fix per problem."""
    if as_json:
        console.print_json(report.to_json())
        return
    rows = report.results
    if len(rows) > FULL_TABLE_ROWS:
        rows = [r for r in rows if r.verdict != "pass"]
    if rows:
        console.print_table(None, ["check", "expected", "got", "verdict"],
                            ((r.check, r.expected, r.got, r.verdict.upper()) for r in rows))
    for r in report.results:
        if r.verdict != "pass":
            console.say(f"{r.verdict}: {r.fix}")
    console.say(report.summary())


Progress = Callable[[int], None]


def progress_bar(total: int, label: str) -> tuple[Progress, Callable[[], None]]:
    """A rich progress bar on a terminal (stderr) for long runs; a no-op otherwise.

    Returns `(advance, close)`.
    """
    import sys

    if total < 500 or not sys.stderr.isatty():
        return (lambda _n: None), (lambda: None)
    from rich.console import Console
    from rich.progress import Progress as RichProgress

    bar = RichProgress(console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=total)
    bar.start()
    return (lambda n: bar.advance(task, n)), bar.stop
