"""The human-readable ``inspect`` report: what the app's overview shows, as text."""

from __future__ import annotations

from collections import Counter

from rollout_graph.core.engine import describe, engines
from rollout_graph.core.findings import top_codes
from rollout_graph.core.records import LEVELS, LoadResult
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.formats.fidelity import fidelity_json, fidelity_text
from rollout_graph.signals.corrections import text_lines

MAX_SKIPPED_SHOWN = 10


def load_lines(loaded: LoadResult) -> list[str]:
    """The load report as text lines: files, records, skips with reasons."""
    lines = [
        f"{len(loaded.files)} file(s): {loaded.records} records, {loaded.loaded} loaded, {len(loaded.skipped)} skipped"
    ]
    for s in loaded.skipped[:MAX_SKIPPED_SHOWN]:
        lines.append(f"  skipped {s.file}:{s.line}: {s.reason}")
    if len(loaded.skipped) > MAX_SKIPPED_SHOWN:
        lines.append(f"  ... and {len(loaded.skipped) - MAX_SKIPPED_SHOWN} more skipped records (see --json)")
    for p in loaded.pending:
        lines.append(f"  pending {p.file}:{p.line}: the last line has no newline yet (a file still being written?)")
    return lines


def row_tokens_text(stats: dict[str, int]) -> str:
    """The token counts summed over the training rows (a call in several rows counts in each), under
    the glossary's names (docs/semantics.md): the same words and numbers in inspect, explain and the app."""
    in_discarded = stats["n_trainable_tokens_in_discarded_rows"]
    return (
        f"trainable tokens (rows) {stats['n_trainable_tokens']:,}"
        + (f" ({in_discarded:,} of them in discarded rows)" if in_discarded else "")
        + f" · context tokens (rows) {stats['n_context_tokens']:,}"
    )


def call_tokens_text(stats: dict[str, int]) -> str:
    """The token counts with each call's own tokens counted once, under the glossary's names."""
    return (
        f"sampled tokens {stats['n_sampled_tokens']:,} · trainable tokens (calls) {stats['n_trainable_call_tokens']:,}"
        f" · discarded tokens {stats['n_discarded_tokens']:,} · context tokens (calls) {stats['n_context_call_tokens']:,}"
        f" · inherited tokens {stats['n_inherited_tokens']:,}"
    )


def rollout_lines(rollout: Rollout) -> list[str]:
    """A rollout's summary as text lines: calls, roots, sequences by role, findings."""
    s = rollout.stats
    roles = Counter(seq.role for seq in rollout.sequences)
    shapes = ", ".join(sorted({c.shape for c in rollout.calls}))
    role_text = ", ".join(f"{role} {n}" for role, n in sorted(roles.items()))
    findings = []
    counts = rollout.finding_counts
    for level in LEVELS:
        # every code, most frequent first (levels go most severe first): none is hidden
        codes = ", ".join(f"{code} x{n}" for code, n in top_codes(rollout.findings, level, limit=None))
        findings.append(f"{level} {counts[level]}" + (f" ({codes})" if codes else ""))
    lines = [
        f"session {rollout.session_id}  [{shapes}]",
        f"  calls {s['n_calls']} · roots {s['n_roots']} · forks {s['n_forks']} · discarded {s['n_discarded']}"
        f" · leaves {s['n_leaves']}",
        f"  retries (discarded, the same prompt re-sent) {s['n_discarded_retries']}"
        f" · broken replays {s['n_broken_replays']} · unfinished attempts {s['n_unfinished']}",
        f"  sequences {s['n_sequences']} ({role_text}) · {row_tokens_text(s)}",
        f"  each call once: {call_tokens_text(s)}",
        "  findings: " + " · ".join(findings),
    ]
    lines.append("  " + fidelity_text(fidelity_json(rollout.calls)))
    lines += ["  engine: " + describe(engine) for engine in engines(rollout.calls)]  # the capture probes
    if rollout.signals is not None:
        lines.append("  signals: " + signals_text(rollout.signals.summary()))
        lines += mismatch_lines(rollout)
        lines += ["  correction " + line for line in text_lines(rollout.signals.summary().get("corrections") or [])]
    return lines


MAX_MISMATCH_LINES = 10  # logprob_mismatch calls named in the text report (`inspect --json` lists them all)


def mismatch_lines(rollout: Rollout) -> list[str]:
    """One line per ``logprob_mismatch`` call, worst first: the call, its worst token's index in
    its sampled span, the row holding it (leaf, file line) and its position in that row."""
    signals = rollout.signals
    if signals is None:
        return []
    from rollout_graph.signals.join import worst_words  # only for rollouts that carry signals

    flagged = [rollout.index_of(f.node_id) for f in signals.findings if f.code == "logprob_mismatch" and f.node_id]
    flagged.sort(key=lambda k: -signals.calls[k].worst_abs_diff)
    lines = [
        f"  logprob_mismatch {rollout.calls[k].node_id}: |Δ| up to {signals.calls[k].worst_abs_diff:.3g} nats"
        + worst_words(rollout, signals, k)
        for k in flagged[:MAX_MISMATCH_LINES]
    ]
    if len(flagged) > MAX_MISMATCH_LINES:
        lines.append(f"  ... {len(flagged) - MAX_MISMATCH_LINES} more logprob_mismatch calls (inspect --json)")
    return lines


def _num(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def signals_text(s: dict) -> str:
    """One line of a rollout's trainer-vs-inference figures (docs/signals.md)."""
    if not s["n_rows"]:
        return "no rows in the signals file" + (f" ({s['n_rows_ignored']} ignored)" if s["n_rows_ignored"] else "")
    parts = [f"reward {_num(s['reward'], '.3g')}", f"rows {s['n_rows']}"]
    if s["n_rows_ignored"]:
        parts.append(f"ignored {s['n_rows_ignored']}")
    if s["n_tokens"]:
        parts += [
            f"compared {s['n_tokens']:,} tokens",
            f"mean |Δ| {_num(s['mean_abs_diff'], '.3g')}",
            f"max |Δ| {_num(s['max_abs_diff'], '.3g')}",
            f"KL k3 {_num(s['kl_k3'], '.2g')}",
            f"ratio outside [0.8, 1.2] {_num(s['ratio_outside_share'], '.1%')}",
        ]
    if s["n_mismatch_calls"]:
        parts.append(f"{s['n_mismatch_calls']} calls over {s['threshold']:g} nat")
    return " · ".join(parts)


def signals_load_lines(report: dict) -> list[str]:
    """The signals file's load report: rows read, skipped (file, line, reason), unmatched."""
    lines = [f"signals: {len(report['files'])} file(s), {report['rows']} rows, {len(report['skipped'])} skipped"]
    for s in report["skipped"][:MAX_SKIPPED_SHOWN]:
        lines.append(f"  skipped {s['file']}:{s['line']}: {s['reason']}")
    if report["n_unmatched_rows"]:
        names = ", ".join(report["unmatched_sessions"][:5])
        more = "" if len(report["unmatched_sessions"]) <= 5 else ", ..."
        lines.append(f"  {report['n_unmatched_rows']} rows for sessions not loaded ({names}{more})")
    return lines


def summary_text(loaded: LoadResult, rollouts: list[Rollout], signals_load: dict | None = None) -> str:
    """The whole readable ``inspect`` report."""
    lines = load_lines(loaded)
    if signals_load is not None:
        lines += signals_load_lines(signals_load)
    for rollout in rollouts:
        lines.append("")
        lines.extend(rollout_lines(rollout))
    return "\n".join(lines) + "\n"
