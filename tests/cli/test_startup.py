"""Start-up of the command line (issue 24): numpy's BLAS loaded with one thread by the console
command only, and ``import rollout_graph`` light enough for the command to set that up first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "sample_traces" / "vllm")


def _python(code: str, **env: str) -> str:
    full = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=full, cwd=ROOT
    ).stdout.strip()


_THREADS = "len(os.listdir('/proc/self/task'))"


def test_importing_the_facade_loads_no_numpy_until_a_name_is_used():
    out = _python(
        "import sys, rollout_graph as rg\n"
        "before = 'numpy' in sys.modules\n"
        "rg.Rollout\n"
        "print(before, 'numpy' in sys.modules, rg.Rollout.__module__, rg.load.__module__)"
    )
    assert out == "False True rollout_graph rollout_graph"


def test_the_facade_still_answers_every_public_name_and_refuses_others():
    out = _python(
        "import rollout_graph as rg\n"
        "from rollout_graph import Limits, Source, analyse\n"
        "assert set(rg.__all__) == set(rg._EXPORTS) | {'__version__'}\n"
        "missing = [n for n in rg.__all__ if not hasattr(rg, n)]\n"
        "try:\n    rg.nothing_here\nexcept AttributeError as e:\n    print(missing, e)"
    )
    assert out == "[] module 'rollout_graph' has no attribute 'nothing_here'"


def test_the_console_command_loads_numpy_with_one_blas_thread_and_leaves_no_variable():
    if (os.cpu_count() or 1) < 2:  # one core: OpenBLAS starts no thread either way
        return
    code = (
        "import os\nfrom rollout_graph.cli import one_blas_thread\n"
        f"print(one_blas_thread(), {_THREADS}, 'OPENBLAS_NUM_THREADS' in os.environ)"
    )
    assert _python(code) == "True 1 False"
    # Without it numpy starts its BLAS threads: the check above can fail.
    assert int(_python(f"import os, numpy\nprint({_THREADS})")) > 1


def test_a_thread_count_the_user_set_is_kept():
    if (os.cpu_count() or 1) < 2:
        return
    code = f"import os\nfrom rollout_graph.cli import one_blas_thread\ndone = one_blas_thread()\nimport numpy\nprint(done, {_THREADS})"
    done, threads = _python(code, OMP_NUM_THREADS="2").split()
    assert done == "False" and int(threads) == 2


def test_a_library_process_that_loaded_numpy_is_left_alone():
    code = (
        "import os, numpy\nfrom rollout_graph.cli import one_blas_thread\n"
        "print(one_blas_thread(), 'OPENBLAS_NUM_THREADS' in os.environ)"
    )
    assert _python(code) == "False False"


def test_main_with_arguments_never_touches_the_process():
    code = (
        "import sys, os\nimport rollout_graph.cli as cli\ncalls = []\n"
        "cli.one_blas_thread = lambda: calls.append(1) or False\n"
        f"cli.main(['inspect', '--json', {TRACE!r}])\nsys.argv = ['rollout-graph', 'inspect', '--json', {TRACE!r}]\n"
        "import atexit\natexit.register(lambda: print(calls, file=sys.stderr))\ncli.main()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stderr.strip().splitlines()[-1] == "[1]"


def test_python_dash_m_runs_the_command_line():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", "--json", TRACE], capture_output=True, check=True, cwd=ROOT
    ).stdout
    assert out.startswith(b'{"load":')


def _console(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_inspect_ends_its_process_once_printed_with_exit_handlers_run():
    code = (
        "import atexit, sys\natexit.register(lambda: print('handler ran', file=sys.stderr))\n"
        f"sys.argv = ['rollout-graph', 'inspect', '--json', {TRACE!r}]\n"
        "from rollout_graph.cli import main\nmain()\nprint('not reached', file=sys.stderr)"
    )
    done = _console(code)
    assert done.returncode == 0
    assert "handler ran" in done.stderr and "not reached" not in done.stderr
    assert json.loads(done.stdout)["sessions"]


def test_a_failing_inspect_keeps_its_exit_code_and_message():
    code = "import sys\nsys.argv = ['rollout-graph', 'inspect', 'no-such-file.jsonl']\nfrom rollout_graph.cli import main\nmain()"
    done = _console(code)
    assert done.returncode == 2 and "no-such-file.jsonl" in done.stderr


def test_with_another_thread_running_the_process_exits_the_normal_way():
    code = (
        "import sys, threading, time\nthreading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
        f"sys.argv = ['rollout-graph', 'inspect', '--json', {TRACE!r}]\n"
        "from rollout_graph.cli import main\nmain()\nprint('returned', file=sys.stderr)"
    )
    done = _console(code)
    assert done.returncode == 0 and "returned" in done.stderr
