"""A training run as a table of steps: ``rollout-graph run DIR`` and the app's Run page.

Every rollout of the run is summarised once by the corpus audit engine (graph/reports/audit.py:
worker processes or Ray, one file at a time, so memory stays bounded), and the per-rollout table
is cached as Parquet beside the load cache (key: every file's path, size and modification time,
and the library's code). Steps are then aggregated from that table alone: the page and ``--json`` never
reopen a trace to draw the trends. A rollout's step comes from its records or its path
(rollout_graph.ingest.formats.fidelity); rollouts without one are counted apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollout_graph.ingest.formats.fidelity import step_from_path
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load import cache
from rollout_graph.ingest.load.trace_files import walk_traces
from rollout_graph.reports import audit
from rollout_graph.reports.reconcile import AUDIT_COLUMNS as RECONCILE_COLUMNS

# The per-step figures, in the order `run` prints them and the page charts them (docs/cli.md).
STEP_COLUMNS = (
    "step", "n_rollouts", "n_errors", "n_calls", "n_tokens", "n_trainable_tokens", "n_sampled_tokens",
    "reward_mean", "reward_min", "reward_max", "discard_rate", "break_rate", "n_fatal", "n_warn", "n_info",
    "mean_abs_diff", "kl_k3", "ratio_outside_share", "n_mismatch_calls", "fidelity", "top_codes",
    # per framework (docs/reconcile.md): the mean delivered fraction and the tokens trained off-policy
    *RECONCILE_COLUMNS,
)  # fmt: skip
CACHE_PREFIX = "run-"

Progress = Callable[[int, int, int], None]


@functools.cache
def _library_fingerprint() -> str:
    """A hash of the whole library's code: the rows depend on the analyses and the audit, not only the readers."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _cache_path(files: list[Path], limits: Limits | None) -> Path | None:
    if not cache.enabled():
        return None
    try:
        key = cache.key_for_files(files, limits if limits is not None else Limits())  # the CLI's and the app's agree
    except OSError:
        return None
    return cache.cache_dir() / f"{CACHE_PREFIX}{key[:24]}-{_library_fingerprint()}.parquet"


RUN_MIN_FILES = 50  # a folder this big naming two or more steps opens on the Run page


def looks_like_run(paths: list[str]) -> bool:
    """Whether the folders hold a training run: ``RUN_MIN_FILES`` trace files or more, naming two or
    more training steps in their paths (a cheap walk, no file is opened)."""
    files: list[Path] = []
    for p in paths:
        if Path(p).exists():
            files += walk_traces(p)[0]
    if len(files) < RUN_MIN_FILES:
        return False
    return len({step_from_path(str(f)) for f in files} - {None}) >= 2


def rollout_rows(
    paths: list[str],
    *,
    workers: int = 1,
    engine: str = "local",
    address: str | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
    use_cache: bool = True,
) -> tuple[list[dict[str, Any]], bool]:
    """One audit row per rollout of the run (rows of files that failed carry their error) and whether
    they came from the cache. Computed by the audit engine the first time, read from the cache after."""
    files = audit.expand_inputs(paths)
    where = _cache_path(files, limits) if use_cache else None
    if where is not None and where.exists():
        try:
            import pyarrow.parquet as pq

            return pq.read_table(where).to_pylist(), True
        except Exception:  # noqa: BLE001 - a damaged cache entry is recomputed
            pass
    if engine == "ray":
        rows = audit.run_ray(files, workers, address, progress, limits)
    else:
        rows = audit.run_local(files, workers, progress, limits)
    if where is not None:
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            audit.write_parquet(rows, where)
        except OSError:
            pass  # a read-only cache folder only costs the next run its speed
    return rows, False


def run_table(
    paths: list[str], *, limits: Limits | None = None, use_cache: bool = True, **engine: Any
) -> tuple[Any, dict[str, Any]]:
    """The per-rollout table as a ``pyarrow.Table`` and the run summary, both cached: what the app
    reads (a cached run of 128,000 rollouts opens without building one Python dict per rollout)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = audit.expand_inputs(paths)
    where = _cache_path(files, limits) if use_cache else None
    summary_path = None if where is None else where.with_suffix(".summary.json")
    if where is not None and summary_path is not None and where.exists() and summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
            summary["from_cache"] = True
            return pq.read_table(where), summary
        except Exception:  # noqa: BLE001 - a damaged cache entry is recomputed
            pass
    rows, from_cache = rollout_rows(paths, limits=limits, use_cache=use_cache, **engine)  # workers, engine, ...
    summary = run_summary(rows, from_cache)
    if summary_path is not None:
        try:
            summary_path.write_text(json.dumps(summary))
        except OSError:
            pass
    if where is not None and where.exists():
        return pq.read_table(where), summary
    return pa.Table.from_pylist([{c: r.get(c) for c in audit.COLUMNS} for r in rows]), summary


def _mean(values: list[Any]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def _total(values: list[Any]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def step_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-step figures from per-rollout rows, steps in order (rollouts without a step are left out)."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("step") is not None:
            by_step[int(row["step"])].append(row)
    out = []
    for step in sorted(by_step):
        group = by_step[step]
        ok = [r for r in group if not r.get("error")]
        calls = sum(r["n_turns"] or 0 for r in ok)
        rewards = [r["reward"] for r in ok if r.get("reward") is not None]
        codes: Counter[str] = Counter(code for r in ok for code in r.get("finding_codes") or ())
        grades = Counter(r["fidelity"] for r in ok if r.get("fidelity"))
        out.append(
            {
                "step": step,
                "n_rollouts": len(ok),
                "n_errors": len(group) - len(ok),
                "n_calls": calls,
                "n_tokens": sum((r["n_trainable_tokens"] or 0) + (r["n_context_tokens"] or 0) for r in ok),
                "n_trainable_tokens": sum(r["n_trainable_tokens"] or 0 for r in ok),
                "n_sampled_tokens": sum(r.get("n_sampled_tokens") or 0 for r in ok),
                "reward_mean": _mean(rewards),
                "reward_min": min(rewards) if rewards else None,
                "reward_max": max(rewards) if rewards else None,
                "discard_rate": (sum(r["n_discarded"] or 0 for r in ok) / calls) if calls else None,
                "break_rate": (sum(r.get("n_broken_replays") or 0 for r in ok) / calls) if calls else None,
                "n_fatal": sum(r["n_fatal"] or 0 for r in ok),
                "n_warn": sum(r["n_warn"] or 0 for r in ok),
                "n_info": sum(r["n_info"] or 0 for r in ok),
                "mean_abs_diff": _mean([r.get("mean_abs_diff") for r in ok]),
                "kl_k3": _mean([r.get("kl_k3") for r in ok]),
                "ratio_outside_share": _mean([r.get("ratio_outside_share") for r in ok]),
                "n_mismatch_calls": sum(r.get("n_mismatch_calls") or 0 for r in ok),
                "fidelity": grades.most_common(1)[0][0] if grades else None,
                "top_codes": [f"{code} x{n}" for code, n in codes.most_common(3)],
                **{
                    col: (_mean if col.endswith("_fraction") else _total)([r.get(col) for r in ok])
                    for col in RECONCILE_COLUMNS
                },
            }
        )
    return out


def run_summary(rows: list[dict[str, Any]], from_cache: bool = False) -> dict[str, Any]:
    """``rollout-graph run --json``: the steps, and what the run holds besides."""
    steps = step_table(rows)
    no_step = [r for r in rows if r.get("step") is None and not r.get("error")]
    errors = [r for r in rows if r.get("error")]
    formats = Counter(r["source_format"] or "trace" for r in rows if not r.get("error"))
    return {
        "n_steps": len(steps),
        "n_rollouts": sum(s["n_rollouts"] for s in steps) + len(no_step),
        "n_rollouts_without_step": len(no_step),
        "n_file_errors": len(errors),
        "file_errors": [{"file": r["source_file"], "error": r["error"]} for r in errors[:20]],
        "formats": dict(formats),
        "from_cache": from_cache,
        "steps": steps,
    }


def step_rollouts(rows: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """The rollouts of one step (their audit rows), worst first: FATAL, then WARN, then lowest reward."""
    picked = [r for r in rows if r.get("step") == step and not r.get("error")]
    return sorted(
        picked,
        key=lambda r: (-(r["n_fatal"] or 0), -(r["n_warn"] or 0), r["reward"] if r.get("reward") is not None else 0.0),
    )


def run_text(summary: dict[str, Any], limit: int = 40) -> str:
    """The human ``run`` report: one line per step (the first and last ``limit // 2`` when there are many)."""
    lines = [
        f"{summary['n_steps']} steps · {summary['n_rollouts']:,} rollouts"
        + (f" ({summary['n_rollouts_without_step']} without a step)" if summary["n_rollouts_without_step"] else "")
        + (f" · {summary['n_file_errors']} files could not be read" if summary["n_file_errors"] else "")
        + " · formats: "
        + ", ".join(f"{k} {v}" for k, v in sorted(summary["formats"].items())),
        f"{'step':>6} {'rollouts':>8} {'calls':>7} {'tokens':>10} {'reward':>8} {'discard':>8} {'break':>7}"
        f" {'FATAL':>5} {'WARN':>5} {'|Δ|':>7} {'KL k3':>8}  fidelity",
    ]
    steps = summary["steps"]
    shown = steps if len(steps) <= limit else [*steps[: limit // 2], None, *steps[-limit // 2 :]]

    def num(v: float | None, spec: str) -> str:
        return "—" if v is None else format(v, spec)

    for s in shown:
        if s is None:
            lines.append(f"{'...':>6} ({len(steps) - limit} more steps: see --json)")
            continue
        lines.append(
            f"{s['step']:>6} {s['n_rollouts']:>8} {s['n_calls']:>7} {s['n_tokens']:>10,} {num(s['reward_mean'], '.3f'):>8}"
            f" {num(s['discard_rate'], '.1%'):>8} {num(s['break_rate'], '.1%'):>7} {s['n_fatal']:>5} {s['n_warn']:>5}"
            f" {num(s['mean_abs_diff'], '.3g'):>7} {num(s['kl_k3'], '.2g'):>8}  {s['fidelity'] or '—'}"
        )
    for e in summary["file_errors"]:
        lines.append(f"  cannot read {e['file']}: {e['error']}")
    return "\n".join(lines) + "\n"
