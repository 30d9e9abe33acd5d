"""For tests that send SIGINT (Ctrl-C) to a child: the child starts with SIGINT at its default.

A background job of a non-interactive shell (`make test &`, a CI step run
with `&`, `nohup`) starts with SIGINT ignored, and an ignored signal stays
ignored across fork and exec (signal(7): "A child created via fork(2)
inherits a copy of its parent's signal dispositions. During an execve(2),
the dispositions of handled signals are reset to the default; the
dispositions of ignored signals are left unchanged"). CPython then installs
no KeyboardInterrupt handler either (it does only when SIGINT is at SIG_DFL
at startup), so the SIGINT a test sends is dropped and the test waits out
its limit. Every Popen whose child is sent SIGINT passes `preexec_fn=` one
of these.
"""

from __future__ import annotations

import signal
from collections.abc import Callable


def sigint_default() -> None:
    """In the child, before exec: SIGINT back to SIG_DFL, whatever the parent had."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def with_sigint_default(then: Callable[[], None]) -> Callable[[], None]:
    """A preexec_fn that resets SIGINT, then runs `then` (e.g. taking a controlling terminal)."""
    def preexec() -> None:
        sigint_default()
        then()

    return preexec
