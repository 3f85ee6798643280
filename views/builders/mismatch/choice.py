"""Which corrections the mismatch lens starts with and shows (pure).

Entry points: ``CHOSEN`` (the session key of the Corrections panel's multiselect, which the DAG's
colour control reads too), ``initial_labels(text)`` (``view --correction``'s choice, given as the
text of its environment variable, else four common corrections), ``chosen_labels(chosen, start)``.

Where it sits: the environment itself is read in views/state/signals.py (builders are pure);
views/panels/corrections.py and views/panels/graph.py offer the labels.
"""

from __future__ import annotations

from rollout_graph.signals.corrections import COMMON, CorrectionError, parse_correction

# the corrections chosen in the Corrections panel (a multiselect's key): the DAG's colour control reads it too
CHOSEN = "rg-corrections-chosen"


def initial_labels(text: str) -> list[str]:
    """What is chosen at first: the labels in ``text`` (``view --correction``'s choice, ";" between
    them; one that does not parse is left out), else four common corrections."""
    labels = []
    for part in text.split(";"):
        try:
            labels.append(parse_correction(part).label) if part.strip() else None
        except CorrectionError:
            continue
    return labels or list(COMMON)


def chosen_labels(chosen: list[str] | None, start: list[str]) -> list[str]:
    """The corrections chosen (the panel's multiselect value), or ``start`` before it is drawn."""
    return list(chosen) if chosen is not None else list(start)
