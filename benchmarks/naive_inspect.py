"""A naive whole-process `inspect` for the baseline: the SPEC written down directly.

Standard-library JSON, token ids in Python lists, and tests/support/reference.py's linking (every arrival
scans every node, for rule 1 and again for rule 2). Reads the vLLM chat JSONL that
benchmarks/synthetic.py writes. ``python benchmarks/naive_inspect.py TRACE.jsonl``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.reference import reference_token_parents  # noqa: E402


def main(path: str) -> None:
    calls = []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            response = record["response"]
            choice = response["choices"][0]
            logprobs = [entry["logprob"] for entry in choice["logprobs"]["content"]]
            calls.append((record["call_id"], response["prompt_token_ids"], choice["token_ids"], logprobs))
    parents = reference_token_parents([(prompt, sampled) for _, prompt, sampled, _ in calls])
    children = {i: [c for c, p in enumerate(parents) if p == i] for i in range(len(calls))}
    roots = [i for i, p in enumerate(parents) if p is None]
    groups = [kids for kids in children.values() if len(kids) > 1]
    by_prompt: dict[tuple, list[int]] = {}
    for r in roots:
        by_prompt.setdefault(tuple(calls[r][1]), []).append(r)
    groups += [g for g in by_prompt.values() if len(g) > 1]
    discarded = {m for g in groups if any(children[x] for x in g) for m in g if not children[m]}
    sequences = []
    for leaf in (i for i in range(len(calls)) if not children[i]):
        path = [leaf]
        while parents[path[-1]] is not None:
            path.append(parents[path[-1]])
        path.reverse()
        ids, mask = [], []
        for k in path:
            parent = parents[k]
            start = 0 if parent is None else len(calls[parent][1]) + len(calls[parent][2])
            context = calls[k][1][start:]
            ids += context + calls[k][2]
            mask += [0] * len(context) + [1] * len(calls[k][2])
        sequences.append({"leaf_id": calls[leaf][0], "n_trainable": sum(mask), "discarded": leaf in discarded})
    json.dump(
        {"n_turns": len(calls), "n_roots": len(roots), "n_discarded": len(discarded), "sequences": sequences},
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
