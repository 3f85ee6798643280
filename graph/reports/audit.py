"""Corpus audit: one row per rollout across many files, on this machine or on a Ray cluster.

Rows are computed per file by :func:`audit_file`, which never raises: a file that cannot be read
becomes a row carrying its error. Engines only decide where :func:`audit_file` runs, so both write
the same rows.
"""

from __future__ import annotations

import functools
import glob
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from rollout_graph.core.records import FATAL, INFO, WARN, LoadResult, SessionInput, Skipped
from rollout_graph.core.roles import AGENT, AUXILIARY, DISCARDED
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.files.sources import Source, path_text
from rollout_graph.ingest.formats.engine_pair import FAILED_SESSION
from rollout_graph.ingest.formats.fidelity import rollout_format, rollout_grade, rollout_step
from rollout_graph.ingest.limits import Limits, may_exceed_sessions, using
from rollout_graph.ingest.load.calls import add_value
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.ingest.load.trace_files import rollout_name, walk_traces
from rollout_graph.ingest.values.read import read_values
from rollout_graph.pipeline import analyse
from rollout_graph.reports.output import atomic_path
from rollout_graph.reports.reconcile import AUDIT_COLUMNS as RECONCILE_COLUMNS
from rollout_graph.reports.reconcile import audit_figures as reconcile_figures
from rollout_graph.signals.corrections import audit_columns, parse_corrections
from rollout_graph.signals.join import DEFAULT_THRESHOLD, attach_all, with_corrections
from rollout_graph.signals.reading import SignalsFile, read_signals

COLUMNS = (
    "source_file", "session_id", "n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded", "n_sequences",
    "rows_agent", "rows_auxiliary", "rows_discarded", "n_trainable_tokens", "n_context_tokens",
    "discarded_sampled_tokens", "n_fatal", "n_warn", "n_info", "finding_codes",
    "mean_trainable_logprob", "min_trainable_logprob", "models", "harness", "error",
    # with --signals (docs/signals.md); null without a signals file or a joined row
    "reward", "signals_rows", "signals_tokens", "mean_abs_diff", "max_abs_diff", "kl_k3", "ratio_outside_share",
    "n_mismatch_calls",
    # with --signals: the k1/k2 estimators, the ESS of the token ratios, the worst tokens, and with
    # --correction what each correction does (docs/corrections.md)
    "kl_k1", "kl_k2", "ratio_ess", "worst_abs_diff", "worst_tokens", "corrections",
    # what the load skipped: this session's failed calls, and the file's skipped records with their reasons
    "n_failed_calls", "file_skipped_records", "file_skip_reasons",
    # the run view (graph/reports/run.py): training step, fidelity grade and source format (docs/formats.md)
    "step", "fidelity", "source_format", "n_broken_replays", "n_sampled_tokens",
    # the glossary's names (docs/semantics.md): n_calls (n_turns is its deprecated alias), each call's
    # own tokens counted once, and n_discarded_tokens (discarded_sampled_tokens is its deprecated alias)
    "n_calls", "n_trainable_call_tokens", "n_context_call_tokens", "n_discarded_tokens", "n_inherited_tokens",
    "n_trainable_tokens_in_discarded_rows",
    # what each RL framework trains from the rollout (docs/reconcile.md): the delivered fraction and
    # the tokens it trains off-policy, per framework (trl_, nemo_gym_, verifiers_, openenv_, nemo_rl_)
    *RECONCILE_COLUMNS,
)  # fmt: skip
SIGNAL_COLUMNS = COLUMNS[COLUMNS.index("reward") : COLUMNS.index("n_failed_calls")]
REASONS_KEPT = 8  # distinct skip reasons listed per file (the most frequent first)


def expand_inputs(inputs: Iterable[str]) -> list[Path]:
    """Files, directories (recursively) and globs -> trace files, each once, in order.

    Unreadable folders and special files (FIFOs, devices) found while walking are kept in the
    list, so each becomes an error row instead of vanishing from the audit.
    """
    seen: dict[Path, None] = {}
    for item in inputs:
        matches = sorted(glob.glob(item, recursive=True)) if glob.has_magic(item) else [item]
        for match in matches:
            files, unreadable = walk_traces(match)
            for path in [*files, *(Path(name) for name, _ in unreadable)]:
                seen.setdefault(path, None)
    return list(seen)


def _trainable_logprobs(rollout: Rollout) -> np.ndarray:
    parts = [
        c.sampled_logprobs
        for c, ok in zip(rollout.calls, rollout.trainable, strict=True)
        if ok and c.n_sampled and c.sampled_logprobs is not None
    ]  # trainable implies aligned logprobs
    return np.concatenate(parts) if parts else np.empty(0)


def audit_row(rollout: Rollout, source: str) -> dict[str, Any]:
    """One audit table row for a rollout: counts, roles, findings and trainable logprob stats."""
    s, counts = rollout.stats, rollout.finding_counts
    roles = Counter(seq.role for seq in rollout.sequences)
    lps = _trainable_logprobs(rollout)
    return {
        "source_file": path_text(source),  # a file name that is not UTF-8, escaped
        "session_id": rollout.session_id,
        **{k: s[k] for k in ("n_turns", "n_roots", "n_leaves", "n_forks", "n_discarded", "n_sequences")},
        "rows_agent": roles.get(AGENT, 0),
        "rows_auxiliary": roles.get(AUXILIARY, 0),
        "rows_discarded": roles.get(DISCARDED, 0),
        "n_trainable_tokens": s["n_trainable_tokens"],
        "n_context_tokens": s["n_context_tokens"],
        "discarded_sampled_tokens": s["n_discarded_tokens"],  # deprecated alias of n_discarded_tokens
        "n_fatal": counts[FATAL],
        "n_warn": counts[WARN],
        "n_info": counts[INFO],
        "finding_codes": sorted({f.code for f in rollout.findings}),
        "mean_trainable_logprob": float(lps.mean()) if lps.size else None,
        "min_trainable_logprob": float(lps.min()) if lps.size else None,
        "models": sorted({c.model for c in rollout.calls if c.model}),
        "harness": next((c.harness for c in rollout.calls if c.harness), None),
        "error": None,
        **signal_figures(rollout),
        "n_failed_calls": 0,  # audit_file fills these three from the load of the whole file
        "file_skipped_records": None,
        "file_skip_reasons": None,
        "step": rollout_step(rollout.calls),
        "fidelity": rollout_grade(rollout.calls),
        "source_format": rollout_format(rollout.calls),
        "n_broken_replays": s["n_broken_replays"],
        "n_sampled_tokens": s["n_sampled_tokens"],
        **{
            k: s[k]
            for k in COLUMNS[COLUMNS.index("n_calls") : COLUMNS.index("n_trainable_tokens_in_discarded_rows") + 1]
        },
        **reconcile_figures(rollout, source),
    }


def signal_figures(rollout: Rollout) -> dict[str, Any]:
    """The audit's signals columns for one rollout (all ``None`` when no signals were joined)."""
    if rollout.signals is None:
        return dict.fromkeys(SIGNAL_COLUMNS)
    s = rollout.signals.summary()
    return {
        "reward": s["reward"],
        "signals_rows": s["n_rows"],
        "signals_tokens": s["n_tokens"],
        "mean_abs_diff": s["mean_abs_diff"],
        "max_abs_diff": s["max_abs_diff"],
        "kl_k3": s["kl_k3"],
        "ratio_outside_share": s["ratio_outside_share"],
        "n_mismatch_calls": s["n_mismatch_calls"],
        **audit_columns(s),
    }


def error_row(source: str, error: str) -> dict[str, Any]:
    """An audit row for a file that could not be analysed."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(source_file=path_text(source), finding_codes=[], models=[], error=error)
    return row


@functools.lru_cache(maxsize=2)
def _signals(paths: tuple[str, ...]) -> SignalsFile:
    """Read once per process (a forked worker inherits the parent's copy)."""
    out = SignalsFile()
    for path in paths:
        out.extend(read_signals(path))
    return out


def load_signals(paths: list[str] | tuple[str, ...]) -> SignalsFile:
    """The signals files an audit joins, read once per process.

    Raises:
        rollout_graph.signals.reading.SignalsError: a file cannot be read.
    """
    return _signals(tuple(str(p) for p in paths))


def _failed_session(reason: str, default: str) -> str | None:
    """The session a skipped failed call belonged to (its reason ends with it), else None."""
    if not reason.startswith("call failed"):
        return None
    head, sep, tail = reason.rpartition(FAILED_SESSION)
    return tail[:-1] if sep and tail.endswith(")") else default


def _reason_kind(reason: str) -> str:
    """A skip reason without its per-record details (the session suffix, a line number), cut short."""
    head, sep, _ = reason.rpartition(FAILED_SESSION)
    text = head if sep and reason.startswith("call failed") else reason
    return text if len(text) <= 120 else text[:119] + "…"


def skip_summary(skipped: list[Skipped], limit: int = REASONS_KEPT) -> list[str]:
    """``"N x reason"`` for the most frequent skip reasons of a file (most frequent first)."""
    counts = Counter(_reason_kind(s.reason) for s in skipped)
    out = [f"{n} x {reason}" for reason, n in counts.most_common(limit)]
    if len(counts) > limit:
        out.append(f"{sum(n for _, n in counts.most_common()[limit:])} x other reasons")
    return out


def audit_file(
    path: str,
    limits: Limits | None = None,
    signals: tuple[str, ...] = (),
    threshold: float = DEFAULT_THRESHOLD,
    corrections: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """Every rollout in one file as a row, joined with the ``signals`` files when given (with the
    ``corrections``, given as specs); never raises.

    Every row also says what the load skipped: ``n_failed_calls`` (this session's failed calls,
    which are skipped records), ``file_skipped_records`` and ``file_skip_reasons`` (the file's).
    A session whose every record is a failed call still gets a row, whose ``error`` says so.
    """
    try:
        limits = limits or Limits()
        streamed = may_exceed_sessions([path], limits)
        if streamed:  # more rollouts than a load may hold: each is analysed as soon as its last line is read
            loaded, streamed_rows = _streamed(path, limits, signals, threshold, corrections)
        else:
            loaded = load_paths([path], limits=limits)
        skipped = list(loaded.skipped)
        file_figures = {"file_skipped_records": len(skipped), "file_skip_reasons": skip_summary(skipped)}
        failed: Counter[str] = Counter()
        for s in skipped:
            session = _failed_session(s.reason, rollout_name(path))
            if session is not None:
                failed[session] += 1
        if loaded.nothing_readable and not failed:
            reason = loaded.skipped[0].reason if loaded.skipped else "no records"
            return [{**error_row(path, reason), **file_figures}]
        if streamed:
            rows = streamed_rows
            for row in rows:  # in place: a copy of every row would double the peak
                row["n_failed_calls"] = failed.get(row["session_id"], 0)
                row.update(file_figures)
        else:
            rollouts = _joined(
                [analyse(session) for session in loaded.sessions.values()], signals, threshold, corrections
            )
            rows = [
                {**audit_row(rollout, path), "n_failed_calls": failed.get(rollout.session_id, 0), **file_figures}
                for rollout in rollouts
            ]
        seen = {r["session_id"] for r in rows} if streamed else set(loaded.sessions)
        for session in sorted(set(failed) - seen):
            note = f"no calls loaded: all {failed[session]} of this session's calls failed"
            rows.append(
                {**error_row(path, note), "session_id": session, "n_failed_calls": failed[session], **file_figures}
            )
        return rows or [{**error_row(path, f"no rollouts ({len(skipped)} records skipped)"), **file_figures}]
    except MemoryError:
        return [
            error_row(path, "out of memory while auditing this file (MemoryError); lower the limits (docs/limits.md)")
        ]
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop a corpus audit
        return [error_row(path, f"{type(exc).__name__}: {exc}")]


def _joined(
    rollouts: list[Rollout], signals: tuple[str, ...], threshold: float, corrections: tuple[str, ...]
) -> list[Rollout]:
    if signals:
        return attach_all(rollouts, load_signals(signals), threshold, parse_corrections(corrections))[0]
    if corrections:  # the trainer columns the traces carry themselves
        return with_corrections(rollouts, parse_corrections(corrections))
    return rollouts


STREAM_BATCH = 1000  # rollouts analysed (and joined) together when a file is streamed


def _streamed(
    path: str, limits: Limits, signals: tuple[str, ...], threshold: float, corrections: tuple[str, ...]
) -> tuple[LoadResult, list[dict[str, Any]]]:
    """A file of more rollouts than ``max_sessions``, read twice so it is never held whole.

    The first pass notes the line where each rollout's last call is; the second loads the file
    again and analyses each rollout as soon as that line is read, keeps its row and lets its calls
    go. Memory is the rollouts open at once (in a file written rollout by rollout, one) plus the
    rows; ``max_sessions`` then bounds the rollouts open at once. The returned load holds the
    file's counts and skipped records but no sessions; the rows lack the file's figures.
    """
    source = Source.from_path(Path(path))
    default = rollout_name(path)
    last: dict[str, int] = {}
    with using(limits):
        scratch = LoadResult()
        for raw in read_values(source, limits):
            if raw.pending:
                continue
            for call in add_value(scratch, raw, source.name, default, {}):
                last[call.session_id] = raw.line
            scratch.sessions.clear()
            scratch.skipped.clear()
        result = LoadResult(files=[source.name])
        shared: dict[str, str] = {}
        rows: list[dict[str, Any]] = []
        ready: list[SessionInput] = []

        def flush() -> None:
            rows.extend(
                audit_row(r, path) for r in _joined([analyse(s) for s in ready], signals, threshold, corrections)
            )
            ready.clear()

        for raw in read_values(source, limits):
            if raw.pending:
                result.pending.append(Skipped(source.name, raw.line, raw.error or "incomplete last line"))
                continue
            for sid in {c.session_id for c in add_value(result, raw, source.name, default, shared)}:
                if last.get(sid, raw.line) <= raw.line and sid in result.sessions:
                    ready.append(result.sessions.pop(sid))
            if len(ready) >= STREAM_BATCH:
                flush()
            if len(shared) > 100_000:  # one copy of each message text: only a saving, never needed
                shared.clear()
            if len(result.sessions) > limits.max_sessions:
                result.skipped.append(
                    Skipped(
                        source.name,
                        raw.line,
                        f"over a limit: more than {limits.max_sessions:,} rollouts are open at once in this file "
                        "(their calls interleave; limit max_sessions, --max-sessions); the rest of this file is not read",
                    )
                )
                result.records += 1
                break
        ready.extend(result.sessions.values())  # the file changed between the passes: whatever is left
        result.sessions.clear()
        flush()
    return result, rows


Progress = Callable[[int, int, int], None]  # files done, files total, rows so far


def run_local(
    files: list[Path],
    workers: int,
    progress: Progress | None = None,
    limits: Limits | None = None,
    signals: tuple[str, ...] = (),
    threshold: float = DEFAULT_THRESHOLD,
    corrections: tuple[str, ...] = (),
) -> list[dict]:
    """Worker processes; each holds one file at a time, so memory is bounded by ``workers``.

    The pool survives its workers: one that dies (killed by the OOM killer or a signal) costs only
    the file it was reading, which becomes an error row, and a fresh worker takes its place.
    """
    names = [str(f) for f in files]
    rows: list[dict] = []
    if signals:
        load_signals(signals)  # read (and fail) once here; forked workers inherit it
    if workers <= 1 or len(names) <= 1:
        results: Iterator[list[dict]] = (audit_file(name, limits, signals, threshold, corrections) for name in names)
        return _collect(results, len(names), rows, progress)
    return _SurvivingPool(names, workers, limits, progress, signals, threshold, corrections).run()


def _worker(
    conn: Connection,
    limits: Limits | None,
    signals: tuple[str, ...],
    threshold: float,
    corrections: tuple[str, ...] = (),
) -> None:
    """Audit the files sent over ``conn`` one at a time until told to stop (None) or orphaned."""
    while True:
        try:
            name = conn.recv()
        except (EOFError, OSError):
            return
        if name is None:
            return
        conn.send(audit_file(name, limits, signals, threshold, corrections))


@dataclass(slots=True)
class _Slot:
    process: Any
    conn: Connection
    index: int | None = None  # the file it is reading


class _SurvivingPool:
    """One pipe per worker, so the parent always knows which file a dead worker was reading."""

    def __init__(
        self,
        names: list[str],
        workers: int,
        limits: Limits | None,
        progress: Progress | None,
        signals: tuple[str, ...] = (),
        threshold: float = DEFAULT_THRESHOLD,
        corrections: tuple[str, ...] = (),
    ) -> None:
        import multiprocessing

        # fork: a spawned or forkserver worker re-runs the parent's __main__ (an app script, a test
        # runner) before it can work; the CLI that starts the pool is single-threaded, so fork is safe.
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self.context: Any = multiprocessing.get_context(method)
        self.names, self.limits, self.progress = names, limits, progress
        self.signals, self.threshold, self.corrections = signals, threshold, corrections
        self.workers = min(workers, len(names))
        self.ordered: list[list[dict] | None] = [None] * len(names)
        self.done = self.total_rows = 0

    def _start(self) -> _Slot:
        parent, child = self.context.Pipe()
        # typeshed declares Process only on the concrete contexts, not on the BaseContext get_context returns
        process = self.context.Process(
            target=_worker, args=(child, self.limits, self.signals, self.threshold, self.corrections), daemon=True
        )
        process.start()
        child.close()
        return _Slot(process, parent)

    def _finish(self, index: int, file_rows: list[dict]) -> None:
        self.ordered[index] = file_rows
        self.done += 1
        self.total_rows += len(file_rows)
        if self.progress:
            self.progress(self.done, len(self.names), self.total_rows)

    def run(self) -> list[dict]:
        from multiprocessing.connection import wait

        queue = list(range(len(self.names)))[::-1]
        slots = [self._start() for _ in range(self.workers)]
        try:
            while queue or any(s.index is not None for s in slots):
                for slot in slots:
                    if slot.index is None and queue:
                        slot.index = queue.pop()
                        try:
                            slot.conn.send(self.names[slot.index])
                        except OSError:
                            pass  # the worker is already dead: noticed below
                busy = [s for s in slots if s.index is not None]
                wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
                for k, slot in enumerate(slots):
                    if slot.index is None:
                        continue
                    file_rows = None
                    try:
                        if slot.conn.poll():
                            file_rows = slot.conn.recv()
                    except (EOFError, OSError):
                        pass
                    if file_rows is not None:
                        self._finish(slot.index, file_rows)
                        slot.index = None
                    elif not slot.process.is_alive():
                        slots[k] = self._replace(slot)
        finally:
            for slot in slots:
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
                slot.conn.close()
            for slot in slots:
                slot.process.join(timeout=5)
                if slot.process.is_alive():
                    slot.process.kill()
        return [row for file_rows in self.ordered for row in file_rows or ()]

    def _replace(self, slot: _Slot) -> _Slot:
        """A dead worker's file becomes an error row; a fresh worker takes the slot."""
        slot.process.join()
        code = slot.process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        name = self.names[slot.index] if slot.index is not None else "?"
        if slot.index is not None:
            self._finish(slot.index, [error_row(name, f"the audit worker reading this file died ({how})")])
        slot.conn.close()
        return self._start()


def run_ray(
    files: list[Path],
    workers: int,
    address: str | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
    signals: tuple[str, ...] = (),
    threshold: float = DEFAULT_THRESHOLD,
    corrections: tuple[str, ...] = (),
) -> list[dict]:
    """One Ray task per file; ``address`` joins an existing cluster (the files must be readable there)."""
    try:
        import ray
    except ImportError as exc:
        raise SystemExit("the ray engine needs the extra: pip install 'rollout-graph[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            options["address"] = address
        else:
            options["num_cpus"] = max(1, workers)
        ray.init(**options)
    try:
        task = ray.remote(audit_file)
        pending = {task.remote(str(f), limits, signals, threshold, corrections): i for i, f in enumerate(files)}
        ordered: list[list[dict] | None] = [None] * len(files)
        done = total_rows = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                file_rows = ray.get(ref)
                ordered[pending.pop(ref)] = file_rows
                done += 1
                total_rows += len(file_rows)
                if progress:
                    progress(done, len(files), total_rows)
        return [row for rows in ordered for row in rows or ()]
    finally:
        if started:
            ray.shutdown()


def _collect(results: Iterable[list[dict]], total: int, rows: list[dict], progress: Progress | None) -> list[dict]:
    for done, file_rows in enumerate(results, start=1):
        rows.extend(file_rows)
        if progress:
            progress(done, total, len(rows))
    return rows


def write_parquet(rows: list[dict], out: Path) -> None:
    """The rows as Parquet, written atomically (graph/reports/output.py).

    Raises:
        OutputError: the output cannot be written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    WORST_TYPE = pa.list_(
        pa.struct(
            [("leaf_id", pa.string()), ("position", pa.int64()), ("node_id", pa.string()), ("d", pa.float64()),
             ("inference_logprob", pa.float64()), ("trainer_logprob", pa.float64())]
        )
    )  # fmt: skip
    CORRECTIONS_TYPE = pa.list_(
        pa.struct(
            [("label", pa.string()), ("n_tokens", pa.int64()), ("n_sequences", pa.int64()),
             ("tokens_affected", pa.int64()), ("sequences_affected", pa.int64()), ("share_tokens", pa.float64()),
             ("weight_lost", pa.float64()), ("ess", pa.float64()), ("sum_weights", pa.float64()),
             ("sum_weights_squared", pa.float64())]
        )
    )  # fmt: skip
    schema = pa.schema(
        [
            ("source_file", pa.string()), ("session_id", pa.string()),
            *[(c, pa.int64()) for c in COLUMNS[2:17]],
            ("finding_codes", pa.list_(pa.string())),
            ("mean_trainable_logprob", pa.float64()), ("min_trainable_logprob", pa.float64()),
            ("models", pa.list_(pa.string())), ("harness", pa.string()), ("error", pa.string()),
            ("reward", pa.float64()), ("signals_rows", pa.int64()), ("signals_tokens", pa.int64()),
            ("mean_abs_diff", pa.float64()), ("max_abs_diff", pa.float64()), ("kl_k3", pa.float64()),
            ("ratio_outside_share", pa.float64()), ("n_mismatch_calls", pa.int64()),
            ("kl_k1", pa.float64()), ("kl_k2", pa.float64()), ("ratio_ess", pa.float64()),
            ("worst_abs_diff", pa.float64()), ("worst_tokens", WORST_TYPE), ("corrections", CORRECTIONS_TYPE),
            ("n_failed_calls", pa.int64()), ("file_skipped_records", pa.int64()),
            ("file_skip_reasons", pa.list_(pa.string())),
            ("step", pa.int64()), ("fidelity", pa.string()), ("source_format", pa.string()),
            ("n_broken_replays", pa.int64()), ("n_sampled_tokens", pa.int64()),
            *[(c, pa.int64()) for c in COLUMNS[COLUMNS.index("n_calls") : COLUMNS.index(RECONCILE_COLUMNS[0])]],
            *[(c, pa.float64() if c.endswith("_fraction") else pa.int64()) for c in RECONCILE_COLUMNS],
        ]
    )  # fmt: skip
    table = pa.Table.from_pylist([{c: row.get(c) for c in COLUMNS} for row in rows], schema=schema)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
