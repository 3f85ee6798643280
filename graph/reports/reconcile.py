"""The reconciler lens in the reports: ``inspect --reconcile`` (JSON and text), ``export --as``
(rows exactly as a framework builds them) and the audit's per-framework columns (docs/reconcile.md,
docs/cli.md).

Everything here reads rollout_graph.analysis.reconcile: :func:`session_json` is one session's
``reconcile`` object of the JSON contract, :func:`session_text` its lines in the text report,
:func:`iter_rows` the records ``export --as`` writes, :func:`audit_figures` the audit and Run
columns (delivered fraction and tokens trained off-policy per framework). :func:`eos_token_id`
reads the EOS id NeMo-RL's splice needs from the tokenizer a rollout was decoded with.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollout_graph.analysis.reconcile import FRAMEWORKS, LABELS, reconcile
from rollout_graph.analysis.reconcile.explain import differences
from rollout_graph.analysis.reconcile.model import PROVENANCE, Reconciled, TrainerRow, row_tokens
from rollout_graph.core.rollout import Rollout

Spec = list[tuple[str, dict[str, Any]]]
AUDIT_FRAMEWORKS = FRAMEWORKS
# the audit's and the Run page's columns per framework (docs/cli.md, "Corpus audit")
AUDIT_FIGURES = ("delivered_fraction", "off_policy_tokens")


def column(framework: str, figure: str) -> str:
    """An audit column's name: ``trl_delivered_fraction``, ``nemo_gym_off_policy_tokens``, ..."""
    return f"{framework.replace('-', '_')}_{figure}"


AUDIT_COLUMNS = tuple(column(f, fig) for f in AUDIT_FRAMEWORKS for fig in AUDIT_FIGURES)


def eos_token_id(tokenizer_json: Path | None) -> int | None:
    """The EOS id of the tokenizer at ``tokenizer_json`` (its ``tokenizer_config.json`` names the
    token), or None."""
    return None if tokenizer_json is None else _eos(tokenizer_json)


@functools.lru_cache(maxsize=16)
def _eos(tokenizer_json: Path) -> int | None:
    try:
        config = json.loads((tokenizer_json.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
        spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    eos = config.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if not isinstance(eos, str):
        return None
    for token in spec.get("added_tokens", []):
        if token.get("content") == eos:
            return int(token["id"])
    vocab = (spec.get("model") or {}).get("vocab") or {}
    found = vocab.get(eos) if isinstance(vocab, dict) else None
    return int(found) if isinstance(found, int) else None


def run_spec(rollout: Rollout, spec: Spec, tokenizer_json: Path | None = None) -> list[Reconciled]:
    """Each framework of ``spec`` for one rollout; NeMo-RL takes the tokenizer's EOS id when it
    is given none."""
    out = []
    for name, params in spec:
        if name == "nemo-rl" and "eos_token_id" not in params:
            eos = eos_token_id(tokenizer_json)
            params = {**params, "eos_token_id": eos} if eos is not None else params
        out.append(reconcile(rollout, name, **params))
    return out


def _row_json(rollout: Rollout, row: TrainerRow, with_tokens: bool) -> dict[str, Any]:
    tokens = row_tokens(rollout, row)
    counts = {name: int((tokens.provenance == code).sum()) for code, name in enumerate(PROVENANCE)}
    out: dict[str, Any] = {
        "row_id": row.row_id,
        "label": row.label,
        "trained": row.trained,
        "why_not": row.why_not,
        "node_ids": [rollout.calls[k].node_id for k in row.calls],
        "length": row.length,
        "n_trained": row.n_mask if row.trained else 0,
        "n_masked": row.n_mask,
        "provenance": counts,
    }
    if with_tokens:
        out["input_ids"] = tokens.input_ids.tolist()
        out["loss_mask"] = tokens.loss_mask.tolist()
        out["logprobs"] = tokens.logprobs.tolist()
        out["token_provenance"] = [PROVENANCE[c] for c in tokens.provenance.tolist()]
    return out


def framework_json(rollout: Rollout, result: Reconciled, with_tokens: bool = False) -> dict[str, Any]:
    """One framework's object under a session's ``reconcile`` (docs/cli.md)."""
    return {
        "framework": result.framework,
        "label": LABELS.get(result.framework, result.framework),
        "params": result.params,
        "summary": result.summary(),
        "rows": [_row_json(rollout, row, with_tokens) for row in result.rows],
        "calls": [{"node_id": c.node_id, **f.as_dict()} for c, f in zip(rollout.calls, result.fates, strict=False)],
        "quarantined": [rollout.calls[k].node_id for k in result.quarantined],
        "notes": result.notes,
        "differences": differences(rollout, result),
    }


def session_json(
    rollout: Rollout, spec: Spec, tokenizer_json: Path | None = None, with_tokens: bool = False
) -> dict[str, Any]:
    """A session's ``reconcile`` object: one entry per framework, in the order asked."""
    return {r.framework: framework_json(rollout, r, with_tokens) for r in run_spec(rollout, spec, tokenizer_json)}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def session_text(rollout: Rollout, spec: Spec, tokenizer_json: Path | None = None) -> str:
    """The text report's lines for one session: a table of the frameworks, then a sentence per difference."""
    results = run_spec(rollout, spec, tokenizer_json)
    lines = [
        "  what the trainers train (docs/reconcile.md): rows trained · trained tokens · never sampled · "
        "sampled tokens dropped · delivered",
    ]
    for r in results:
        s = r.summary()
        name = LABELS.get(r.framework, r.framework)
        if r.error is not None and not r.rows:
            lines.append(f"    {name:<10} {r.error}")
            continue
        lines.append(
            f"    {name:<10} {s['n_rows_trained']} of {s['n_rows']} rows · {s['n_trained_tokens']:,} · "
            f"{s['n_trained_never_sampled']:,} · {s['n_dropped_tokens']:,} of {s['n_sampled_tokens']:,} · "
            f"{_pct(s['delivered_fraction'])}"
            + (f" · {s['n_quarantined_calls']} quarantined" if s["n_quarantined_calls"] else "")
            + (
                f" · {s['n_trained_without_logprob']:,} trained without a logprob"
                if s["n_trained_without_logprob"]
                else ""
            )
        )
    for r in results:
        for d in differences(rollout, r):
            lines.append(f"    · {d['sentence']}")
    return "\n".join(lines) + "\n"


def iter_rows(
    rollout: Rollout, framework: str, params: dict[str, Any], tokenizer_json: Path | None = None
) -> Iterator[dict[str, Any]]:
    """``export --as``: every row the framework builds, in its order, with ``trained`` (what its
    trainer trains), the framework's own label and each token's provenance."""
    (result,) = run_spec(rollout, [(framework, params)], tokenizer_json)
    for row in result.rows:
        tokens = row_tokens(rollout, row)
        yield {
            "session_id": rollout.session_id,
            "framework": framework,
            "row_id": row.row_id,
            "label": row.label,
            "trained": row.trained,
            "why_not": row.why_not or "",
            "node_ids": [rollout.calls[k].node_id for k in row.calls],
            "input_ids": tokens.input_ids.tolist(),
            "loss_mask": tokens.loss_mask.tolist(),
            "logprobs": tokens.logprobs.tolist(),
            "provenance": [PROVENANCE[c] for c in tokens.provenance.tolist()],
            "n_trained": row.n_mask if row.trained else 0,
        }


def tokenizer_for(rollout: Rollout, source: str | None = None) -> Path | None:
    """The tokenizer file the offline resolution finds for the rollout's model (beside ``source``,
    bundled, the Hugging Face cache; never a download), or None."""
    from rollout_graph.analysis.decode import find_tokenizer

    model = next((c.model for c in rollout.calls if c.model), None)
    try:
        found = find_tokenizer(model, [Path(source)] if source else [])
    except (OSError, ValueError):
        return None
    return found.path if found is not None else None


def audit_figures(rollout: Rollout, source: str | None = None) -> dict[str, Any]:
    """The audit's per-framework columns: the delivered fraction (sampled tokens the trainer trains)
    and the tokens it trains off-policy, for each framework with its defaults (NeMo-RL's EOS id from
    the tokenizer found for the rollout's model)."""
    out: dict[str, Any] = {}
    tokenizer = tokenizer_for(rollout, source)
    for name in AUDIT_FRAMEWORKS:
        try:
            (result,) = run_spec(rollout, [(name, {})], tokenizer)
            s = result.summary()
        except Exception:  # noqa: BLE001 - one framework failing must never cost the audit row
            s = {"delivered_fraction": None, "n_trained_off_policy": None}
        out[column(name, "delivered_fraction")] = s["delivered_fraction"]
        out[column(name, "off_policy_tokens")] = s["n_trained_off_policy"]
    return out
