"""The floor a cold ``inspect`` is measured against: ``orjson.loads`` of every line, nothing else.

``python benchmarks/floor_orjson.py TRACE.jsonl`` prints the number of non-blank lines parsed.
No record shapes, no arrays, no linking: the cost of reading the JSON once with the fastest parser.
"""

from __future__ import annotations

import sys

import orjson


def main(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                orjson.loads(line)
                n += 1
    print(n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
