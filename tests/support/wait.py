"""Polling for a condition, with a deadline and a message that says what was awaited."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class Timeout(AssertionError):
    pass


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 0.2,
    describe: Callable[[], str] | None = None,
) -> T:
    """Return predicate()'s first truthy value; raise Timeout naming `what` and the last error,
    with `describe()` (the state a reader needs to see why) appended."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - reported if the deadline passes
            last_error = e
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            if describe is not None:
                try:
                    detail += "\n" + describe()
                except Exception as e:  # noqa: BLE001 - the timeout is what matters
                    detail += f"\n(could not describe the state: {e!r})"
            raise Timeout(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(interval)
