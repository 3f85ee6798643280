"""Writing output files atomically: a temporary file beside the target, renamed on success.

An interrupted or failed run (a full disk, Ctrl-C, an exception) removes its temporary file and
leaves any older file at the target untouched, so a file at the target name is always complete.
A process killed outright (SIGKILL) can leave only a hidden ``.NAME.PID.*.partial`` file, which
never looks like the output; the next run writing the same output removes such files whose
process is gone (and older unnamed ones, ``.NAME.*.partial``/``.tmp``, after an hour). The output
gets the mode the umask gives a new file (``0666 & ~umask``, like ``open()``), never mkstemp's
0600. Errors from the disk become :class:`OutputError` with a one-line reason.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputError(Exception):
    """The output cannot be written (no space, read-only folder, permission): one line for the user."""


def _reason(out: Path, exc: OSError) -> str:
    return f"cannot write {out}: {exc.strerror or exc}"


STALE_SECONDS = 3600  # an unnamed temporary file this old is left over from a killed run


def _umask() -> int:
    """The process umask, read without changing it (Linux); else the set-and-restore dance."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open()`` would give a new file: ``0666 & ~umask``."""
    return 0o666 & ~_umask()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out: Path) -> list[Path]:
    """Remove temporary files a killed run left beside ``out``; returns the paths removed."""
    removed: list[Path] = []
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(?:(\d+)\.)?[^/]*\.(?:partial|tmp)\Z")
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None:
            continue
        try:
            if match.group(1) is not None:
                stale = int(match.group(1)) != os.getpid() and not _alive(int(match.group(1)))
            else:
                stale = time.time() - entry.lstat().st_mtime > STALE_SECONDS
            if stale and entry.is_file():
                entry.unlink()
                removed.append(entry)
        except OSError:
            continue
    return removed


@contextmanager
def atomic_path(out: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``out``'s folder; on success it replaces ``out``.

    Raises:
        OutputError: the folder cannot be created or written, or the disk is full.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(out)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".partial", dir=out.parent)
    except OSError as exc:
        raise OutputError(_reason(out, exc)) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, out)
    except OSError as exc:
        raise OutputError(_reason(out, exc)) from None
    finally:
        tmp.unlink(missing_ok=True)
