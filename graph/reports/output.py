"""Writing output files atomically: a temporary file beside the target, renamed on success.

An interrupted or failed run (a full disk, Ctrl-C, an exception) removes its temporary file and
leaves any older file at the target untouched, so a file at the target name is always complete.
A process killed outright (SIGKILL) can leave only a hidden ``.NAME.*.partial`` file, which never
looks like the output. Errors from the disk become :class:`OutputError` with a one-line reason.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputError(Exception):
    """The output cannot be written (no space, read-only folder, permission): one line for the user."""


def _reason(out: Path, exc: OSError) -> str:
    return f"cannot write {out}: {exc.strerror or exc}"


@contextmanager
def atomic_path(out: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``out``'s folder; on success it replaces ``out``.

    Raises:
        OutputError: the folder cannot be created or written, or the disk is full.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    except OSError as exc:
        raise OutputError(_reason(out, exc)) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        raise OutputError(_reason(out, exc)) from None
    finally:
        tmp.unlink(missing_ok=True)
