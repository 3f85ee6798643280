"""Wait on a condition, never on the clock: a bounded poll for what another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], timeout: float = 10.0, what: str = "the condition", interval: float = 0.02
) -> T:
    """Call ``condition()`` until it returns something truthy and return that; fail naming ``what``
    after ``timeout`` seconds. An exception from ``condition`` counts as not yet (the last one is
    named in the failure), except an AssertionError: a condition asserts what must never happen
    while waiting (the process exited), and that fails at once."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - not ready yet (a server still starting, a file half written)
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what}" + (f" (last: {last!r})" if last else "")
            )
        time.sleep(interval)
