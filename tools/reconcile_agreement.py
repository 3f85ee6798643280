"""Measure how often each reconciler builds exactly the rows its framework's own code builds
(docs/reconcile.md, "Agreement, measured"): on the bundled samples (sample_traces/) and on every
rollout of the real writers' fixtures (tests/fixtures/writers/), and on NeMo Gym's and the rLLM
gateway's capture records (tests/reconcile/fixtures/), read by their own readers.

- TRL (its own loop and its OpenEnv harness), OpenEnv and verifiers: their code run live by the
  oracle workers (tests/reconcile/oracle.py; ROLLOUT_GRAPH_WRITERS_PYTHON /
  ROLLOUT_GRAPH_VERIFIERS_PYTHON name the venvs `bash .ci/writers-env` builds);
- NeMo Gym: the builder's answers tools/make_reconcile_fixtures.py recorded from its source
  (tests/reconcile/fixtures/nemo_gym.jsonl), both builders.

A row agrees when its ids, loss mask and logprobs (6 places) are the framework's, and for OpenEnv
its role and trainable flag, for verifiers its trainable flag; a rollout agrees when all its rows
do and both sides agree on refusing it. Prints a Markdown table.

    ROLLOUT_GRAPH_WRITERS_PYTHON=... ROLLOUT_GRAPH_VERIFIERS_PYTHON=... .venv/bin/python tools/reconcile_agreement.py
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rollout_graph as rg  # noqa: E402
from rollout_graph.analysis.reconcile import reconcile  # noqa: E402
from rollout_graph.analysis.reconcile.nemo_gym import reconcile_nemo_gym  # noqa: E402
from tests.reconcile.cases import case_from_rollout, our_rows, rounded  # noqa: E402
from tests.reconcile.oracle import Oracle, interpreter  # noqa: E402

WRITERS = ROOT / "tests" / "fixtures" / "writers"
CAPTURE_READERS = ROOT / "tests" / "reconcile" / "fixtures"
# label -> (oracle, our framework, our parameters, compared keys beyond ids/mask/logprobs)
LIVE = {
    "TRL": ("trl", "trl", {}, ()),
    "TRL (OpenEnv harness)": ("trl-openenv", "trl", {"source": "openenv"}, ()),
    "OpenEnv": ("openenv", "openenv", {}, ("label", "trained")),
    "verifiers": ("verifiers", "verifiers", {}, ("trained",)),
}


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("README.md", "STABLE"))


def groups() -> dict[str, list]:
    """Rollouts with calls: the bundled samples, and the real writers' fixtures file by file."""
    samples = [r for r in rg.load(ROOT / "sample_traces").values() if r.calls]
    writers = [r for p in _files(WRITERS) for r in rg.load(p).values() if r.calls]
    captures = [
        r
        for folder in ("nemo_gym_capture", "rllm_gateway")  # NeMo Gym's and the rLLM gateway's records
        for p in _files(CAPTURE_READERS / folder)
        for r in rg.load(p).values()
        if r.calls
    ]
    return {"bundled samples": samples, "real writers' fixtures": writers, "capture records": captures}


def _keep(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    base = ("input_ids", "mask", "logprobs")
    return [{k: r[k] for k in (*base, *keys)} for r in rows]


def live(oracle: Oracle, rollouts, ours: str, params: dict, keys) -> Counter:
    tally: Counter = Counter()
    for rollout in rollouts:
        expected = oracle.run(case_from_rollout(rollout))
        result = reconcile(rollout, ours, **params)
        theirs, mine = _keep(rounded(expected["rows"]), keys), _keep(our_rows(rollout, result), keys)
        same_rows = sum(a == b for a, b in zip(mine, theirs, strict=False))
        same = (result.error is None) == (expected["error"] is None) and len(mine) == len(theirs) == same_rows
        tally.update(rollouts=1, rollouts_same=int(same), rows=len(theirs), rows_same=same_rows)
    return tally


def nemo_gym(rollouts) -> dict[str, Counter]:
    """Our chains against the fixture lines of the same file and session (both builders)."""
    from tests.reconcile.test_nemo_gym_fixtures import _chains, _theirs

    lines = [json.loads(x) for x in (CAPTURE_READERS / "nemo_gym.jsonl").read_text().splitlines()]
    by_key = {(c["source"]["sample"], c["session_id"]): c for c in lines if "sample" in c["source"]}
    out: dict[str, Counter] = {}
    for builder in ("prefix_merging", "per_request"):
        tally: Counter = Counter()
        for rollout in rollouts:
            key = (str(Path(rollout.calls[0].source).resolve().relative_to(ROOT)), rollout.session_id)
            case = by_key.get(key)
            if case is None:
                tally.update(no_fixture=1)
                continue
            result = reconcile_nemo_gym(rollout, builder)
            mine, theirs = _chains(rollout, result), _theirs(case[builder])
            same_rows = sum(a == b for a, b in zip(mine, theirs, strict=False))
            quarantine = [rollout.calls[k].node_id for k in result.quarantined] == case[builder]["quarantined"]
            same = quarantine and len(mine) == len(theirs) == same_rows
            tally.update(rollouts=1, rollouts_same=int(same), rows=len(theirs), rows_same=same_rows)
        out[f"NeMo Gym ({builder})"] = tally
    return out


def main() -> int:
    found = groups()
    table: dict[str, dict[str, Counter]] = {}
    for label, (name, ours, params, keys) in LIVE.items():
        python = interpreter(name)
        if python is None:
            print(f"{label}: no interpreter with its packages (bash .ci/writers-env)", file=sys.stderr)
            continue
        oracle = Oracle(name, python)
        try:
            table[label] = {g: live(oracle, rs, ours, params, keys) for g, rs in found.items()}
        finally:
            oracle.close()
    for g, rs in found.items():
        for label, tally in nemo_gym(rs).items():
            table.setdefault(label, {})[g] = tally
    names = list(found)
    print("| framework | " + " | ".join(f"{g}: rollouts identical | {g}: rows identical" for g in names) + " |")
    print("|---|" + "---|---|" * len(names))
    for label, per in table.items():
        cells = []
        for g in names:
            t = per.get(g, Counter())
            if not t["rollouts"]:  # nothing of that group to compare (NeMo Gym on its own records)
                cells += ["-", "-"]
                continue
            cells += [f"{t['rollouts_same']} of {t['rollouts']}", f"{t['rows_same']} of {t['rows']}"]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(f"\n{sum(len(r) for r in found.values())} rollouts: " + ", ".join(f"{g} {len(r)}" for g, r in found.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
