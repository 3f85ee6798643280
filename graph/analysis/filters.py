"""Which calls of a rollout match a filter (role, findings, finish reason, link, model, logprobs).

A pure function of the rollout and the filter; the app dims the calls that do not match. Each
facet is a set of accepted values: an empty set accepts every call, values within a facet are
alternatives (OR), facets combine with AND. A call matches the findings facets when one of its
own findings has an accepted level (and an accepted code). ``linked_by`` is how a call was
linked to its parent (``tokens``, ``messages``, ``document``) or :data:`ROOT` for a root.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rollout_graph.core.rollout import Rollout

ROOT = "root (not linked)"
NONE = "none"  # a finish reason or model that was not recorded


@dataclass(frozen=True, slots=True)
class CallFilter:
    """Accepted values per facet; an empty facet accepts everything."""

    roles: frozenset[str] = frozenset()
    levels: frozenset[str] = frozenset()
    codes: frozenset[str] = frozenset()
    finish_reasons: frozenset[str] = frozenset()
    linked_by: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    logprob_below: float | None = None  # a sampled token with a logprob under this

    @property
    def active(self) -> bool:
        """Whether any facet restricts the calls."""
        facets = (self.roles, self.levels, self.codes, self.finish_reasons, self.linked_by, self.models)
        return any(facets) or self.logprob_below is not None


def linked_by(rollout: Rollout, i: int) -> str:
    """How call ``i`` was linked to its parent, or :data:`ROOT`."""
    return rollout.linked_by[i] or ROOT


def facet_values(rollout: Rollout) -> dict[str, Counter[str]]:
    """Every value each facet takes in this rollout, with how many calls have it."""
    n = len(rollout.calls)
    levels: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for i in range(n):
        found = rollout.findings_for(i)
        levels.update({f.level for f in found})
        codes.update({f.code for f in found})
    return {
        "roles": Counter(rollout.node_roles),
        "levels": levels,
        "codes": codes,
        "finish_reasons": Counter(c.finish_reason or NONE for c in rollout.calls),
        "linked_by": Counter(linked_by(rollout, i) for i in range(n)),
        "models": Counter(c.model or NONE for c in rollout.calls),
    }


def min_logprobs(rollout: Rollout) -> np.ndarray:
    """Per call, its lowest recorded sampled logprob (NaN without any)."""
    out = np.full(len(rollout.calls), np.nan)
    for i, call in enumerate(rollout.calls):
        lps = call.sampled_logprobs
        if lps is not None and lps.shape[0] and not np.isnan(lps).all():
            out[i] = float(np.nanmin(lps))
    return out


def matching(rollout: Rollout, wanted: CallFilter) -> np.ndarray:
    """A boolean per call (arrival order): True where the call passes every facet."""
    n = len(rollout.calls)
    keep = np.ones(n, dtype=bool)
    if not wanted.active:
        return keep
    roles = rollout.node_roles
    for i, call in enumerate(rollout.calls):
        if wanted.roles and roles[i] not in wanted.roles:
            keep[i] = False
        elif wanted.finish_reasons and (call.finish_reason or NONE) not in wanted.finish_reasons:
            keep[i] = False
        elif wanted.models and (call.model or NONE) not in wanted.models:
            keep[i] = False
        elif wanted.linked_by and linked_by(rollout, i) not in wanted.linked_by:
            keep[i] = False
        elif wanted.levels or wanted.codes:
            keep[i] = any(
                (not wanted.levels or f.level in wanted.levels) and (not wanted.codes or f.code in wanted.codes)
                for f in rollout.findings_for(i)
            )
    if wanted.logprob_below is not None:
        with np.errstate(invalid="ignore"):
            keep &= min_logprobs(rollout) < wanted.logprob_below
    return keep
