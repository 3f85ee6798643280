"""Whether ``inspect --json --no-cache`` prints the same bytes with this checkout and another one.

A speed change must not change one byte of the JSON contract (docs/performance.md, "Link and
analyse of a cold inspect"). This runs ``rollout-graph inspect --json --no-cache`` on every
bundled sample and test fixture (each trace file, and each folder holding traces, as a user
opens them), on synthetic traces of several shapes (``benchmarks/synthetic.py``, written to a
temporary folder) and on any trace given, once with this checkout's code and once with the other
checkout's (``--against DIR``: a checkout's root, e.g. made with ``git worktree add --detach DIR
REV``), and compares the outputs byte for byte (stdout, the exit code, and stderr but for the reading
progress, whose figures depend on the reading speed). Each side runs in a process of its own that
imports ``rollout_graph`` from its checkout. Prints one line per input and exits 1 on any
difference (the first differing line of each is shown).

    git worktree add --detach /tmp/base main
    .venv/bin/python benchmarks/same_inspect.py --against /tmp/base TRACE.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import CHECKOUT_FINDER  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet", ".gz")
# synthetic shapes: the default mix, two other seeds, a small context (many compactions), flat ids
SYNTHETIC = (
    ["--calls", "300", "--seed", "1"],
    ["--calls", "300", "--seed", "2", "--max-context", "3000", "--summary-tokens", "50"],
    ["--calls", "300", "--seed", "3", "--max-context", "6000"],
    ["--calls", "200", "--seed", "4", "--flat"],
)

# Runs the CLI of the checkout named first, on each input named after it, in one process; prints
# a JSON list of [exit code, stdout, stderr]. A finder placed first maps the package names to that
# checkout's folders (as the editable install maps them to this one's).
RUNNER = (
    r"""
import contextlib, importlib.util, io, json, sys
root = sys.argv[1]
"""
    + CHECKOUT_FINDER
    + r"""from rollout_graph.cli import main, one_blas_thread
one_blas_thread()
out = []
for path in sys.argv[2:]:
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    stderr = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(["inspect", "--json", "--no-cache", path])
        except SystemExit as exit_:
            code = exit_.code
    out.append([code, stdout.buffer.getvalue().decode("utf-8", "replace"), stderr.getvalue()])
sys.__stdout__.write(json.dumps(out))
"""
)


def inputs(given: list[Path], folder: Path, synthetic: bool) -> list[Path]:
    """Every trace file and every folder holding one under the samples and the fixtures, the
    synthetic traces (written to ``folder``) and the given paths."""
    found: list[Path] = []
    for base in (ROOT / "sample_traces", ROOT / "tests" / "fixtures"):
        files = sorted(p for p in base.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
        found += files
        found += sorted({p.parent for p in files})
    if synthetic:
        for k, options in enumerate(SYNTHETIC):
            path = folder / f"synthetic-{k}.jsonl"
            subprocess.run(
                [sys.executable, str(HERE / "synthetic.py"), str(path), *options], check=True, capture_output=True
            )
            found.append(path)
    return found + given


def run(root: Path, paths: list[Path]) -> list[list]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(root), *map(str, paths)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{root}: the runner failed:\n{done.stderr[-3000:]}")
    result: list[list] = json.loads(done.stdout)
    return result


# the reading progress on stderr depends on how fast the file was read, not on what was read
PROGRESS = re.compile(r"^rollout-graph: reading [^\n]*\n?", re.MULTILINE)


def comparable(result: list) -> tuple:
    """(exit code, stdout, stderr without the progress lines)."""
    code, out, err = result
    return code, out, PROGRESS.sub("", err.replace("\r", ""))


def first_difference(a: str, b: str) -> str:
    for k, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            return f"line {k + 1}:\n  this:    {x[:300]}\n  against: {y[:300]}"
    return f"one output is longer ({len(a)} vs {len(b)} characters)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, help="more traces or folders to compare")
    parser.add_argument("--against", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the synthetic traces")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        paths = inputs(args.traces, Path(folder), not args.no_synthetic)
        ours, theirs = run(ROOT, paths), run(args.against.resolve(), paths)
    differ = 0
    for path, a, b in zip(paths, ours, theirs, strict=True):
        a, b = comparable(a), comparable(b)
        same = a == b
        differ += not same
        label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{'same' if same else 'DIFFERENT'}  {label}  ({len(a[1]):,} bytes, exit {a[0]})")
        if not same:
            if a[0] != b[0]:
                print(f"  exit codes: this {a[0]}, against {b[0]}")
            print("  " + first_difference(a[1] + a[2], b[1] + b[2]))
    print(f"{len(paths) - differ} of {len(paths)} inputs print the same bytes")
    raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
