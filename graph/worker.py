"""Load untrusted bytes in a capped child process: parse, link and analyse, then hand back data, never objects.

Entry points: :func:`load_in_child` (the caller's side: the app runs every upload through it,
docs/limits.md, "One upload, one capped process") and the child's main (``python -m
rollout_graph.worker DIR``, a fresh interpreter). The child's address space and CPU time are
capped, it has a wall-clock budget (:class:`LoadTimedOut`), it is killed when ``alive()`` says the
visitor left (:class:`LoadCancelled`) and it dies with its parent. It reads with
:func:`rollout_graph.ingest.load.calls.load_sources` and hands the calls back in the parsed-trace
cache's form (graph/ingest/load/cache.py) and the analysis as JSON (:func:`encode_rollout`):
nothing derived from a trace is ever unpickled in the caller. A load that form cannot carry (a NaN
in a free-form field) comes back as ``None``, to be read in the caller's process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rollout_graph.core.records import Finding, LoadResult, NearMiss, Skipped
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence
from rollout_graph.core.topology import Topology
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import GB, Limits, human, parse_size
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.children import die_with_parent
from rollout_graph.pipeline import Decoders, analyse

ENV_SECONDS = "ROLLOUT_GRAPH_MAX_LOAD_SECONDS"
ENV_MEMORY = "ROLLOUT_GRAPH_MAX_LOAD_MEMORY"
DEFAULT_SECONDS = 60.0
DEFAULT_MEMORY = 2 * GB
_CACHE_KEY = "upload"
_MANIFEST = "manifest.json"
_PROGRESS = "progress.json"
_STATUS = "status.json"
_ROLLOUTS = "rollouts.json"

Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Budget:
    """What one load in a child may take: wall-clock seconds and address space (bytes, ``RLIMIT_AS``)."""

    seconds: float = DEFAULT_SECONDS
    memory_bytes: int | None = DEFAULT_MEMORY

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Budget:
        """``ROLLOUT_GRAPH_MAX_LOAD_SECONDS`` and ``ROLLOUT_GRAPH_MAX_LOAD_MEMORY`` (a size; ``0``:
        no cap) over the defaults; a malformed value keeps the default."""
        env = os.environ if environ is None else environ
        seconds, memory = DEFAULT_SECONDS, DEFAULT_MEMORY
        with contextlib.suppress(KeyError, ValueError):
            seconds = float(env[ENV_SECONDS])
            if not seconds > 0:
                seconds = DEFAULT_SECONDS
        with contextlib.suppress(KeyError, ValueError):
            memory = parse_size(env[ENV_MEMORY])
        return cls(seconds, memory or None)


class LoadRefused(RuntimeError):
    """The child did not deliver: over the time budget, out of memory, cancelled, or it failed.

    ``detail`` is the child's own reason when it failed otherwise (it may quote the trace: escape it
    before it reaches a page)."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class LoadTimedOut(LoadRefused):
    """The load ran past :attr:`Budget.seconds` and was killed."""


class LoadOutOfMemory(LoadRefused):
    """The load needed more than :attr:`Budget.memory_bytes`."""


class LoadCancelled(LoadRefused):
    """``alive()`` returned False (the visitor left) and the load was killed."""


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:g} s"


def timed_out_message(label: str, seconds: float) -> str:
    """The message of :class:`LoadTimedOut`: the budget, where it is set, what to run instead."""
    return (
        f"{label} took longer than {_seconds(seconds)} to analyse and was stopped "
        f"(limit {ENV_SECONDS}, `rollout-graph view --max-load-seconds`); "
        "use `rollout-graph audit` or `rollout-graph inspect` on it locally"
    )


def out_of_memory_message(label: str, memory: int | None) -> str:
    """The message of :class:`LoadOutOfMemory`."""
    cap = human(memory) if memory else "the memory available"
    return (
        f"{label} needed more than {cap} of memory to analyse and was stopped "
        f"(limit {ENV_MEMORY}); use `rollout-graph audit` or `rollout-graph inspect` on it locally"
    )


# ---------------------------------------------------------------------------------------------
# The analysis as JSON


def encode_rollout(rollout: Rollout) -> dict[str, Any]:
    """What :func:`rollout_graph.pipeline.analyse` derived, as JSON-able data (the calls and the
    document travel in the load's columnar form). Findings an embedded-signals join added are left
    out: :func:`decode_rollout` joins them again."""
    findings = rollout.findings
    if rollout.signals is not None:
        findings = findings[: len(findings) - len(rollout.signals.findings)]
    topo = rollout.topology
    return {
        "session_id": rollout.session_id,
        "topology": {
            "parents": topo.parents,
            "children": topo.children,
            "roots": topo.roots,
            "leaves": topo.leaves,
            "forks": topo.forks,
            "root_of": topo.root_of,
            "depth": topo.depth,
            "discarded": [[k, v] for k, v in topo.discarded.items()],
            "unfinished": topo.unfinished,
        },
        "sequences": [[getattr(s, f.name) for f in dataclasses.fields(Sequence)] for s in rollout.sequences],
        "findings": [[f.level, f.code, f.detail, f.node_id, f.leaf_id] for f in findings],
        "trainable": [bool(t) for t in rollout.trainable],
        "linked_by": rollout.linked_by,
        "near_misses": [
            [getattr(m, f.name) for f in dataclasses.fields(NearMiss)] for m in rollout.near_misses.values()
        ],
        "replaced_by": [
            [getattr(m, f.name) for f in dataclasses.fields(NearMiss)] for m in rollout.replaced_by.values()
        ],
        "tokenizer": rollout.tokenizer,
        "embedded_signals": rollout.signals is not None,
    }


def decode_rollout(data: dict[str, Any], loaded: LoadResult) -> Rollout:
    """The :class:`Rollout` :func:`encode_rollout` described, on the calls of ``loaded``.

    Raises:
        KeyError, TypeError, ValueError: the data does not describe a rollout of ``loaded``.
    """
    import numpy as np

    session = loaded.sessions[data["session_id"]]
    t = data["topology"]
    n = len(session.calls)
    if len(t["parents"]) != n or len(data["trainable"]) != n:
        raise ValueError("the analysis does not match the loaded calls")
    topology = Topology(
        parents=t["parents"],
        children=t["children"],
        roots=t["roots"],
        leaves=t["leaves"],
        forks=t["forks"],
        root_of=t["root_of"],
        depth=t["depth"],
        discarded={int(k): int(v) for k, v in t["discarded"]},
        unfinished=t["unfinished"],
    )
    misses = [NearMiss(*m) for m in data["near_misses"]]
    rollout = Rollout(
        session_id=session.session_id,
        calls=session.calls,
        topology=topology,
        sequences=[Sequence(*s) for s in data["sequences"]],
        findings=[Finding(*f) for f in data["findings"]],
        trainable=np.array(data["trainable"], dtype=bool),
        linked_by=data["linked_by"],
        near_misses={m.node: m for m in misses},
        replaced_by={m.node: m for m in (NearMiss(*m) for m in data.get("replaced_by", []))},
        tokenizer=data["tokenizer"],
        document=session.document,
    )
    if data.get("embedded_signals"):
        from rollout_graph.signals.embedded import attach_embedded

        rollout = attach_embedded(rollout)
    return rollout


# ---------------------------------------------------------------------------------------------
# The caller's side


@dataclass
class ChildLoad:
    """What a child delivered: the load and its analysed rollouts (both ``None``: the columnar form
    could not carry this load; load it in process), and the child's peak memory and seconds."""

    loaded: LoadResult | None
    rollouts: dict[str, Rollout] | None
    peak_bytes: int | None
    seconds: float


def load_in_child(
    named: list[tuple[str, bytes]],
    limits: Limits | None = None,
    budget: Budget | None = None,
    *,
    label: str = "this upload",
    alive: Callable[[], bool] | None = None,
    progress: Progress | None = None,
    poll: float = 0.1,
) -> ChildLoad:
    """Parse, link and analyse in-memory files (uploads) in a capped child process.

    Args:
        named: (file name, bytes) per file, in order.
        limits: the reading limits (graph/ingest/limits.py).
        budget: time and memory for the child (default: :meth:`Budget.from_env`).
        label: how messages name the load ("this upload").
        alive: polled every ``poll`` seconds; False kills the child (a visitor left).
        progress: called on this thread with the child's latest progress
            (``{"stage", "files_done", "files_total", "records", "lines_total", "sessions_done",
            "sessions_total", "elapsed", "budget"}``; ``lines_total`` is None for compressed files),
            when it changes and at least every second.

    Raises:
        LoadTimedOut: over ``budget.seconds``.
        LoadOutOfMemory: over ``budget.memory_bytes``.
        LoadCancelled: ``alive()`` returned False.
        LoadRefused: the child failed otherwise (its last error line is in the message).
    """
    budget = budget or Budget.from_env()
    limits = limits or Limits()
    try:
        folder = Path(tempfile.mkdtemp(prefix="rg-load-"))
    except OSError as exc:
        raise LoadRefused(f"{label} could not be analysed: no temporary folder ({exc.strerror or exc})") from None
    try:
        inputs = folder / "in"
        inputs.mkdir()
        try:
            for i, (_, data) in enumerate(named):
                (inputs / str(i)).write_bytes(data)
        except OSError as exc:  # a full temporary disk: say so, never a traceback
            detail = f"it could not be written to a temporary folder ({exc.strerror or exc})"
            raise LoadRefused(f"{label} could not be analysed: {detail}", detail) from None
        manifest = {
            "names": [name for name, _ in named],
            "limits": {f.name: getattr(limits, f.name) for f in dataclasses.fields(Limits)},
            "memory_bytes": budget.memory_bytes,
            "cpu_seconds": int(budget.seconds) + 30,
            "parent": os.getpid(),
        }
        (folder / _MANIFEST).write_bytes(orjson.dumps(manifest))
        env = dict(os.environ)
        # one thread per native library and few malloc arenas: address space is what the cap counts
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
        env["ROLLOUT_GRAPH_CACHE"] = "off"
        start = time.monotonic()
        with open(folder / "stderr", "wb") as err:
            child = subprocess.Popen(
                [sys.executable, "-m", "rollout_graph.worker", str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
        try:
            last, reported = None, 0.0
            while child.poll() is None:
                time.sleep(poll)
                if time.monotonic() - start > budget.seconds:
                    _kill(child)
                    raise LoadTimedOut(timed_out_message(label, budget.seconds))
                if alive is not None and not alive():
                    _kill(child)
                    raise LoadCancelled(f"{label} was cancelled: its browser session ended")
                if progress is not None:
                    now = _read_json(folder / _PROGRESS)
                    elapsed = time.monotonic() - start
                    if now is not None and (now != last or elapsed - reported >= 1.0):
                        last, reported = now, elapsed
                        progress({**now, "elapsed": elapsed, "budget": budget.seconds})
        finally:
            if child.poll() is None:
                _kill(child)
        seconds = time.monotonic() - start
        status = _read_json(folder / _STATUS)
        if status is None or status.get("state") != "done":
            kind = None if status is None else status.get("state")
            if kind == "memory" or (kind is None and child.returncode in (-signal.SIGSEGV, -signal.SIGABRT, -9)):
                raise LoadOutOfMemory(out_of_memory_message(label, budget.memory_bytes))
            detail = (status.get("error") if status else _last_line(folder / "stderr")) or (
                f"the process exited ({child.returncode})"
            )
            raise LoadRefused(f"{label} could not be analysed: {detail}", detail)
        peak = status.get("peak_bytes")
        if not status.get("transferable"):
            return ChildLoad(None, None, peak, seconds)
        loaded = cache.load(_CACHE_KEY, folder / "out")
        if loaded is None:
            return ChildLoad(None, None, peak, seconds)
        loaded.pending = [Skipped(str(f), int(line), str(reason)) for f, line, reason in status.get("pending", ())]
        raw = orjson.loads((folder / _ROLLOUTS).read_bytes())
        rollouts = {}
        for item in raw:
            rollout = decode_rollout(item, loaded)
            rollouts[rollout.session_id] = rollout
        return ChildLoad(loaded, rollouts, peak, seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # its own session: any helper it started goes too
    with contextlib.suppress(ProcessLookupError):
        child.kill()
    child.wait()


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def _last_line(path: Path) -> str | None:
    try:
        lines = [line for line in path.read_bytes().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return None
    return lines[-1][:300] if lines else None


# ---------------------------------------------------------------------------------------------
# The child's side


def _write_json(folder: Path, name: str, value: Any) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_bytes(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, folder / name)


def _cap(manifest: dict[str, Any]) -> None:
    try:
        import resource
    except ImportError:  # not a POSIX system: the wall-clock budget still holds
        return

    memory = manifest.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = manifest.get("cpu_seconds")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _peak() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def child_main(folder: Path) -> int:
    """Run in the child: read the manifest, load, analyse, write the result (exit status 0)."""
    manifest = orjson.loads((folder / _MANIFEST).read_bytes())
    die_with_parent(int(manifest["parent"]))
    _cap(manifest)
    try:
        return _child_work(folder, manifest)
    except MemoryError:
        with contextlib.suppress(MemoryError, OSError):
            _write_json(folder, _STATUS, {"state": "memory"})
        return 3


def _child_work(folder: Path, manifest: dict[str, Any]) -> int:
    names = manifest["names"]
    limits = Limits(**manifest["limits"])
    state: dict[str, Any] = {"stage": "reading", "files_total": len(names), "files_done": 0, "records": 0}

    def report(done: int, total: int, records: int) -> None:
        state.update(files_done=done, records=records)
        _write_json(folder, _PROGRESS, state)

    datas = [(folder / "in" / str(i)).read_bytes() for i in range(len(names))]
    # lines bound the records from above (plain files; a compressed one is unknown): the bar's reading half
    compressed = any(d[:2] == b"\x1f\x8b" or d[:4] == b"\x28\xb5\x2f\xfd" for d in datas)
    lines = sum(d.count(b"\n") + (1 if d and not d.endswith(b"\n") else 0) for d in datas)
    state["lines_total"] = None if compressed else lines
    sources = [Source.from_bytes(name, data) for name, data in zip(names, datas, strict=True)]
    del datas
    loaded = load_sources(sources, report, limits)
    del sources
    shutil.rmtree(folder / "in", ignore_errors=True)
    rollouts = []
    total = len(loaded.sessions)
    state.update(stage="analysing", sessions_total=total, sessions_done=0)
    _write_json(folder, _PROGRESS, state)
    last = time.monotonic()
    decoders = Decoders()
    for done, (sid, session) in enumerate(loaded.sessions.items(), 1):
        rollouts.append(encode_rollout(analyse(session, decoder=decoders(session.calls))))
        if time.monotonic() - last > 0.2 or done == total:
            last = time.monotonic()
            state.update(sessions_done=done)
            _write_json(folder, _PROGRESS, state)
        del sid
    transferable = cache.store(_CACHE_KEY, loaded, folder / "out")
    if transferable:
        try:
            _write_json(folder, _ROLLOUTS, rollouts)
        except TypeError:
            transferable = False
    # the cache's form has no place for pending last lines (a file still being written): they travel here
    pending = [[p.file, p.line, p.reason] for p in loaded.pending]
    status = {"state": "done", "transferable": transferable, "peak_bytes": _peak(), "pending": pending}
    _write_json(folder, _STATUS, status)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(child_main(Path(sys.argv[1])))
    except Exception as exc:  # noqa: BLE001 - the caller reads the reason, never a traceback
        with contextlib.suppress(Exception):
            _write_json(Path(sys.argv[1]), _STATUS, {"state": "error", "error": f"{type(exc).__name__}: {exc}"})
        sys.exit(2)
