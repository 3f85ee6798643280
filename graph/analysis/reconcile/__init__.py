"""The reconciler lens: what TRL, NeMo Gym, verifiers, OpenEnv and NeMo-RL would train from one
capture, token by token (docs/reconcile.md).

Each framework rebuilds training rows from the calls with rules of its own; each module here
follows one framework's code path by path, as a pure function of an analysed rollout:
``trl`` (``_chain_to_sequences``: CLEAN / REALIGN / FORK), ``nemo_gym`` (``prefix_merging`` /
``per_request``, the quarantine, ``BuildNotes``), ``verifiers`` (the message graph), ``openenv``
(the exact-prefix graph, roles as labels), ``nemo_rl`` (the splice at the Nth EOS, then NeMo Gym).
``model`` is what they all answer in (rows of call slices, provenance per token, each call's
fate); ``explain`` words the differences, naming the break that caused each (the near misses,
read-only); ``origin`` refines the provenance of prompt ids.

Entry points: :func:`reconcile` (one framework), :func:`reconcile_all`, :func:`parse_spec`
(``trl:fork_threshold_tokens=0,nemo-gym:builder=per_request``). Nothing here changes the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollout_graph.analysis.reconcile.model import Reconciled
from rollout_graph.core.rollout import Rollout

FRAMEWORKS = ("trl", "nemo-gym", "verifiers", "openenv", "nemo-rl")
DEFAULT_FRAMEWORKS = ("trl", "nemo-gym", "verifiers", "openenv", "nemo-rl")
LABELS = {"trl": "TRL", "nemo-gym": "NeMo Gym", "verifiers": "verifiers", "openenv": "OpenEnv", "nemo-rl": "NeMo-RL"}
# each framework's parameters and how a command line spells their values
PARAMETERS: dict[str, dict[str, Callable[[str], Any]]] = {
    "trl": {"fork_threshold_tokens": int, "source": str},
    "nemo-gym": {"builder": str},
    "verifiers": {},
    "openenv": {},
    "nemo-rl": {"eos_token_id": int},
}


def reconcile(rollout: Rollout, framework: str, **params: Any) -> Reconciled:
    """One framework's rows for one rollout.

    Raises:
        ValueError: an unknown framework or parameter (the message names the known ones).
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)})")
    unknown = set(params) - set(PARAMETERS[framework])
    if unknown:
        known = ", ".join(PARAMETERS[framework]) or "none"
        raise ValueError(f"{framework} takes no parameter {', '.join(sorted(unknown))} (known: {known})")
    if framework == "trl":
        from rollout_graph.analysis.reconcile.trl import reconcile_trl

        return reconcile_trl(rollout, **params)
    if framework == "nemo-gym":
        from rollout_graph.analysis.reconcile.nemo_gym import reconcile_nemo_gym

        return reconcile_nemo_gym(rollout, **params)
    if framework == "verifiers":
        from rollout_graph.analysis.reconcile.verifiers import reconcile_verifiers

        return reconcile_verifiers(rollout)
    if framework == "openenv":
        from rollout_graph.analysis.reconcile.openenv import reconcile_openenv

        return reconcile_openenv(rollout)
    from rollout_graph.analysis.reconcile.nemo_rl import reconcile_nemo_rl

    return reconcile_nemo_rl(rollout, **params)


def parse_spec(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``trl,nemo-gym:builder=per_request,trl:fork_threshold_tokens=0`` -> frameworks with their
    parameters, in order (``all`` names every framework).

    Raises:
        ValueError: an unknown framework, parameter or value (naming the known ones).
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, *pairs = item.split(":")
        name = name.strip().lower()
        if name == "all":
            out += [(f, {}) for f in FRAMEWORKS]
            continue
        if name not in FRAMEWORKS:
            raise ValueError(f"unknown framework {name!r} (known: {', '.join(FRAMEWORKS)}, all)")
        params: dict[str, Any] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or key not in PARAMETERS[name]:
                known = ", ".join(PARAMETERS[name]) or "none"
                raise ValueError(f"{name}: bad parameter {pair!r} (known: {known}; write key=value)")
            try:
                params[key] = PARAMETERS[name][key](value.strip())
            except ValueError:
                raise ValueError(f"{name}: {key} must be {PARAMETERS[name][key].__name__}, not {value!r}") from None
        out.append((name, params))
    if not out:
        raise ValueError(f"name at least one framework ({', '.join(FRAMEWORKS)}, all)")
    return out


def reconcile_all(rollout: Rollout, spec: list[tuple[str, dict[str, Any]]] | None = None) -> list[Reconciled]:
    """Every framework of ``spec`` (default: all of them) for one rollout, in order."""
    spec = spec if spec is not None else [(f, {}) for f in DEFAULT_FRAMEWORKS]
    return [reconcile(rollout, name, **params) for name, params in spec]
