"""What a child process of the loader sets up first: it ends when the process that started it does.

Entry point: :func:`die_with_parent` (Linux ``PR_SET_PDEATHSIG``), called first thing by the
two-part read's forked helper (``two_parts.py``) and by the upload worker (graph/worker.py), so
neither outlives a server or a command that was killed.
"""

from __future__ import annotations

import contextlib
import os


def die_with_parent(parent: int | None = None) -> None:
    """This process ends (SIGKILL) when ``parent`` (default: the parent now) does; it exits at once
    when that parent is already gone (it died before the request took effect)."""
    parent = os.getppid() if parent is None else parent
    with contextlib.suppress(Exception):
        import ctypes  # standard library, needed only in a child
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
