"""The `upi wait` state machine: wait, retry timeouts, retire the bootstrap, resume.

Everything that touches the outside (the installer, HAProxy, libvirt, the
clock) comes in through `WaitHooks`, so the same loop runs against the real
programs and, in tests, against fakes of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from upi.errors import UpiError
from upi.installer_log import LogEvent, parse_line
from upi.wait.policy import INTERRUPTED, classify, meaning
from upi.wait.state import Stage, load_state, save_state

# The installer's own budgets (platform none): 20 min for the API + 45 min for
# bootstrap; 40 min for cluster initialisation + 30 min for operators.
BOOTSTRAP_BUDGET = 65 * 60.0
INSTALL_BUDGET = 70 * 60.0
ERROR_TAIL = 5


class WaitFailed(UpiError):
    """The installer failed in a way that waiting longer will not fix."""


class WaitInterrupted(UpiError):
    """Ctrl-C: children stopped; the recorded stages let a re-run resume."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass
class WaitHooks:
    """What the driver does to the world; each a plain callable."""

    # run `openshift-install wait-for TARGET`, feeding each output line; returns the exit code
    run_installer: Callable[[str, Callable[[str], None]], int]
    remove_bootstrap: Callable[[], None]
    on_event: Callable[[LogEvent], None] = lambda _e: None
    on_stage: Callable[[str, str], None] = lambda _s, _m: None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class WaitOptions:
    """Budgets and choices of one `upi wait` run."""

    assets: Path
    keep_bootstrap: bool = False
    bootstrap_budget: float = BOOTSTRAP_BUDGET
    install_budget: float = INSTALL_BUDGET
    retry_pause: float = 10.0
    # Seconds for the whole run; replaces both budgets (retries stop when it has passed).
    deadline: float | None = None


@dataclass
class WaitResult:
    """Seconds per stage (this run's, or the recorded ones), attempts, console URL."""

    seconds: dict[str, float] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)
    console_url: str | None = None
    current: str | None = None  # the stage running now (what an interruption reports)


def _attempt(hooks: WaitHooks, target: str, result: WaitResult) -> tuple[int, list[str]]:
    errors: list[str] = []

    def feed(line: str) -> None:
        event = parse_line(line)
        if event.kind == "error":
            errors.append(event.message)
        if event.kind == "console":
            result.console_url = event.value
        hooks.on_event(event)

    return hooks.run_installer(target, feed), errors


def _wait_for(hooks: WaitHooks, target: str, budget: float, pause: float,
              result: WaitResult) -> None:
    """Run `wait-for TARGET` until it succeeds, retrying timeouts within `budget`."""
    start = hooks.clock()
    attempt = 0
    while True:
        attempt += 1
        result.attempts[target] = attempt
        code, errors = _attempt(hooks, target, result)
        if code == 0:
            return
        if code == INTERRUPTED:
            raise WaitInterrupted(f"openshift-install was interrupted during {target}", target)
        verdict = classify(code, errors)
        elapsed = hooks.clock() - start
        if not verdict.retry or elapsed + pause >= budget:
            why = verdict.reason if not verdict.retry else f"gave up after {elapsed / 60:.0f} min"
            said = meaning(code) if why == meaning(code) else f"{meaning(code)}; {why}"  # never twice
            tail = "\n".join(f"  {line}" for line in errors[-ERROR_TAIL:])
            raise WaitFailed(
                f"wait-for {target} failed (exit {code}: {said})"
                + (f"; the installer's last errors:\n{tail}" if tail else "")
            )
        hooks.on_stage(target, f"retrying ({verdict.reason}), attempt {attempt + 1}")
        hooks.sleep(pause)


def _stage(hooks: WaitHooks, opts: WaitOptions, result: WaitResult, name: Stage,
           work: Callable[[], None]) -> None:
    state = load_state(opts.assets)
    if state.is_done(name):
        result.seconds[name] = state.done[name]
        result.resumed.append(name)
        hooks.on_stage(name, "already done")
        return
    hooks.on_stage(name, "started")
    result.current = name
    start = hooks.clock()
    try:
        work()
    except KeyboardInterrupt:
        raise WaitInterrupted(f"interrupted during {name}", name) from None
    state.mark(name, hooks.clock() - start)
    save_state(opts.assets, state)
    result.seconds[name] = state.done[name]
    hooks.on_stage(name, "done")


def run_wait(hooks: WaitHooks, opts: WaitOptions) -> WaitResult:
    """Bootstrap-complete, retire the bootstrap, install-complete; resumable.

    Ctrl-C (KeyboardInterrupt) during a stage becomes WaitInterrupted naming it.
    """
    result = WaitResult()
    pause = opts.retry_pause
    end = None if opts.deadline is None else hooks.clock() + opts.deadline

    def budget(default: float) -> float:
        return default if end is None else max(0.0, end - hooks.clock())

    _stage(hooks, opts, result, "bootstrap_complete",
           lambda: _wait_for(hooks, "bootstrap-complete", budget(opts.bootstrap_budget), pause, result))
    if opts.keep_bootstrap:
        hooks.on_stage("bootstrap_removed", "kept (--keep-bootstrap)")
    else:
        _stage(hooks, opts, result, "bootstrap_removed", hooks.remove_bootstrap)
    _stage(hooks, opts, result, "install_complete",
           lambda: _wait_for(hooks, "install-complete", budget(opts.install_budget), pause, result))
    result.current = None
    return result
