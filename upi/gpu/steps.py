"""What the GPU flow reports and how it waits: stages, changes, diagnoses, deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from upi.errors import UpiError

T = TypeVar("T")


class Reporter(Protocol):
    """Where the flow says what it does (the live display, `upi wait`'s display, a list in tests)."""

    def stage(self, name: str, message: str) -> None:
        """A stage started, finished, or failed."""

    def note(self, message: str) -> None:
        """Something the flow did or saw."""

    def warn(self, message: str) -> None:
        """A problem that does not stop the flow."""


@dataclass(frozen=True)
class Diagnosis:
    """Why the flow stopped: the step, the object, what it showed, the last log lines."""

    step: str
    object: str
    problem: str
    cause: str = ""
    log: tuple[str, ...] = ()
    fix: str = ""

    def text(self) -> str:
        """The paragraph printed on failure."""
        out = [f"GPU step '{self.step}' failed at {self.object}: {self.problem}"]
        if self.cause:
            out.append(f"likely cause: {self.cause}")
        if self.fix:
            out.append(f"fix: {self.fix}")
        if self.log:
            out.append("last log lines:")
            out.extend(f"  {line}" for line in self.log)
        return "\n".join(out)


class GpuFailed(UpiError):
    """A GPU step failed or timed out (exit 1); carries the diagnosis."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        self.diagnosis = diagnosis
        super().__init__(diagnosis.text())


@dataclass
class Clock:
    """The run's deadline and polling pace (tests shorten both)."""

    timeout: float
    poll: float = 2.0
    settle: float = 60.0
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float:
        """When the run gives up (monotonic clock)."""
        return self.started + self.timeout

    def left(self) -> float:
        """Seconds until the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def wait_for(
        self,
        probe: Callable[[], T | None],
        on_timeout: Callable[[], Diagnosis],
        *,
        limit: float | None = None,
    ) -> T:
        """Poll `probe` until it returns something; GpuFailed(on_timeout()) at the deadline."""
        end = min(self.deadline, time.monotonic() + limit) if limit is not None else self.deadline
        while True:
            found = probe()
            if found is not None:
                return found
            if time.monotonic() >= end:
                raise GpuFailed(on_timeout())
            time.sleep(min(self.poll, max(0.0, end - time.monotonic())))


@dataclass(frozen=True)
class Change:
    """One object the flow wrote (or would write): created, configured or unchanged."""

    object: str
    action: str


# What a failed build leaves in the log: the compiler's and make's errors, the DTK entrypoint's verdict
# (NVIDIA/gpu-driver-container rhel9/ocp_dtk_entrypoint: "FATAL: no NVIDIA driver generated").
BUILD_ERRORS = ("fatal error:", "error:", "] Error ", "FATAL: no NVIDIA driver generated",
                "Could not locate Linux kernel version")


def classify_driver_log(lines: list[str]) -> str:
    """Driver build vs load vs registry: the cause a driver pod's log points at."""
    text = "\n".join(lines)
    if "not signed by a key" in text or "Key was rejected" in text:
        return (
            "Secure Boot is on: the unsigned NVIDIA kernel module cannot load; turn Secure Boot off in "
            "the node's firmware (Redfish SecureBootEnable) or sign the module"
        )
    if "build-dockercfg" in text or "DriverToolkit" in text or "registry" in text:
        return (
            "the image registry has no storage (or the driver-toolkit imagestream is missing): the "
            "driver build cannot start; configure registry storage"
        )
    if "system not yet initialized" in text:
        return "NVSwitch system without Fabric Manager: the driver container must start nv-fabricmanager"
    # Errors, not progress: a good build log says "Compiling ..." and runs `+ modprobe nvidia` too.
    if "could not insert" in text or "modprobe: ERROR" in text or "insmod: ERROR" in text:
        return "the driver was built but failed to load"
    if any(sign in text for sign in BUILD_ERRORS):
        return "the driver failed to build against this kernel"
    return ""
