"""Child processes that are sent Ctrl-C as a terminal would send it.

A shell starts a background job (`cmd &`, as a CI runner or a developer's `( ... &)` may start the
test run) with SIGINT ignored, and an ignored signal stays ignored across exec: the flashfleet
process under test would then never see the SIGINT the test sends. A child started inside
`sigint_as_at_a_terminal()` starts with SIGINT at its default, as a command typed at a terminal
does: a signal this process catches is reset to its default by exec."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_as_at_a_terminal() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
