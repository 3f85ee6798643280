"""The human-readable ``inspect`` report: what the app's overview shows, as text."""

from __future__ import annotations

from collections import Counter

from graph.core.findings import top_codes
from graph.core.records import LEVELS, LoadResult
from graph.core.rollout import Rollout

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


def rollout_lines(rollout: Rollout) -> list[str]:
    """A rollout's summary as text lines: calls, roots, sequences by role, findings."""
    s = rollout.stats
    roles = Counter(seq.role for seq in rollout.sequences)
    shapes = ", ".join(sorted({c.shape for c in rollout.calls}))
    role_text = ", ".join(f"{role} {n}" for role, n in sorted(roles.items()))
    findings = []
    counts = rollout.finding_counts
    for level in LEVELS:
        codes = ", ".join(f"{code} x{n}" for code, n in top_codes(rollout.findings, level))
        findings.append(f"{level} {counts[level]}" + (f" ({codes})" if codes else ""))
    return [
        f"session {rollout.session_id}  [{shapes}]",
        f"  turns {s['n_turns']} · roots {s['n_roots']} · forks {s['n_forks']} · discarded {s['n_discarded']}"
        f" · leaves {s['n_leaves']}",
        f"  discarded by the harness (real retries) {s['n_discarded_retries']}"
        f" · broken replays {s['n_broken_replays']} · unfinished attempts {s['n_unfinished']}",
        f"  sequences {s['n_sequences']} ({role_text}) · trainable tokens {s['n_trainable_tokens']:,}"
        f" · context tokens {s['n_context_tokens']:,}",
        "  findings: " + " · ".join(findings),
    ]


def summary_text(loaded: LoadResult, rollouts: list[Rollout]) -> str:
    """The ``inspect`` text report: load summary, then each rollout."""
    lines = load_lines(loaded)
    for rollout in rollouts:
        lines.append("")
        lines.extend(rollout_lines(rollout))
    return "\n".join(lines) + "\n"
