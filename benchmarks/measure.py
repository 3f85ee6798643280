"""Run one CLI command in this process and report its peak resident memory on stderr.

``python benchmarks/measure.py [--naive] inspect PATH --json``: ``--naive`` swaps the fast
linking for the reference implementation in tests/support/reference.py (a scan over every node for
every insert, on Python lists), so the whole process can be compared end to end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def naive_token_parents(calls):
    from tests.support.reference import reference_token_parents

    return reference_token_parents(
        [(None if c.prompt_ids is None else c.prompt_ids.tolist(), c.sampled_ids.tolist()) for c in calls]
    )


def peak_rss_bytes() -> int:
    """This process's high-water resident set (VmHWM; unlike ru_maxrss it is not inherited
    from the parent across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--naive":
        import rollout_graph.core.linking

        rollout_graph.core.linking.token_parents = naive_token_parents
        args = args[1:]
    from rollout_graph.cli import main as cli

    code = cli(args)
    sys.stdout.flush()
    print(f"peak_rss_bytes={peak_rss_bytes()}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
