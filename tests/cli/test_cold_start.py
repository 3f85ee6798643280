"""What a cold ``rollout-graph inspect --json --no-cache`` process imports and does between the
load and the print (issue 24): only the modules its output uses, the loaded traces exempt from the
garbage collector's scans, and the same bytes as the command run in-process."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from rollout_graph.cli import main
from rollout_graph.resources import samples_dir

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "sample_traces" / "vllm"

# The console command, with an exit handler (the quick exit runs them) that reports the modules
# imported and whether the garbage collector was told to leave the loaded objects alone.
_CONSOLE = (
    "import atexit, gc, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nREPORT ' + json.dumps("
    "{'modules': sorted(sys.modules), 'frozen': gc.get_freeze_count(), 'collecting': gc.isenabled(),"
    " 'held': [type(x).__name__ for x in getattr(sys.modules.get('rollout_graph.cli.inspect'), '_HELD', [])]})"
    " + '\\n'))\n"
    "sys.argv = ['rollout-graph', *sys.argv[1:]]\n"
    "from rollout_graph.cli import main\n"
    "raise SystemExit(main())\n"
)


def _console(*args: str) -> tuple[int, bytes, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUT_GRAPH_")}
    done = subprocess.run([sys.executable, "-c", _CONSOLE, *args], capture_output=True, env=env, cwd=ROOT)
    report = next(line for line in done.stderr.decode().splitlines() if line.startswith("REPORT "))
    return done.returncode, done.stdout, json.loads(report.removeprefix("REPORT "))


def test_inspect_json_imports_only_what_its_output_uses():
    code, out, report = _console("inspect", "--json", "--no-cache", str(TRACE))
    assert code == 0 and json.loads(out)["sessions"]
    modules = set(report["modules"])
    assert "rollout_graph.reports.contract" in modules and "rollout_graph.pipeline" in modules
    never = {
        "rollout_graph.reports.summary",  # the text summary
        "rollout_graph.reports.transcript",  # --decode
        "rollout_graph.signals.join",  # --signals
        "rollout_graph.escape",  # the terminal escaper: --json prints no trace text raw
        "importlib.resources",  # the samples folder is found from its import spec
        "importlib.metadata",
        "zipfile",
        "tempfile",  # the cache writer: --no-cache
        "pyarrow",
        "signal",  # the two-part read's helper: a one-process load never signals one
    }
    assert not never & modules, sorted(never & modules)


def test_the_console_command_prints_the_bytes_main_prints_in_process(capsysbinary):
    code, out, report = _console("inspect", "--json", "--no-cache", str(TRACE))
    assert code == 0
    assert report["frozen"] > 0  # the console process settled its loaded traces
    assert report["collecting"]  # and collects again after the load
    # what it loaded and printed is left to the quick exit, not taken apart as run() returns
    assert report["held"] == ["Inputs", "dict"]
    frozen = gc.get_freeze_count()
    assert main(["inspect", "--json", "--no-cache", str(TRACE)]) == 0
    assert capsysbinary.readouterr().out == out
    assert gc.get_freeze_count() == frozen  # main(argv) in a library process never freezes anything
    from rollout_graph.cli import inspect

    assert inspect._HELD == []  # nor holds what it loaded


def test_the_text_summary_and_a_usage_error_keep_working():
    code, out, report = _console("inspect", "--no-cache", str(TRACE))
    assert code == 0 and b"fix-config-bug" in out
    assert "rollout_graph.reports.contract" not in report["modules"]
    missing = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "inspect", "--json", str(ROOT / "no-such-trace.jsonl")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2
    assert "no-such-trace.jsonl: no such file or directory" in missing.stderr and "Traceback" not in missing.stderr


def test_the_samples_folder_is_the_one_importlib_resources_finds():
    from importlib.resources import files

    assert samples_dir() == Path(str(files("rollout_graph.samples")))
    assert (samples_dir() / "vllm").is_dir()


# Loads several shapes with the collector off and counts what a collection then finds: the
# console inspect loads that way (rollout_graph.cli.common.settle), so a loader that began to
# make a reference cycle per record would grow its memory; this keeps it from happening quietly.
_CYCLES = (
    "import gc, json, sys\n"
    "from rollout_graph.ingest.load.files import load_paths\n"
    "gc.collect(); gc.disable()\n"
    "loaded = load_paths([__import__('pathlib').Path(p) for p in sys.argv[1:]])\n"
    "calls = sum(len(s.calls) for s in loaded.sessions.values())\n"
    "print(json.dumps({'calls': calls, 'skipped': len(loaded.skipped), 'garbage': gc.collect()}))\n"
)


def test_the_load_makes_next_to_no_reference_cycles(tmp_path):
    hostile = tmp_path / "hostile.jsonl"
    lines = []
    for i in range(4000):
        lines += [
            '{"broken": [1, 2,',  # not JSON
            json.dumps({"unknown": i, "x": {"y": [1, 2, 3]}}),  # an unknown shape
            "[1, 2, 3]",  # not an object
            json.dumps({"request": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}}),  # no response
        ]
    hostile.write_text("\n".join(lines) + "\n")
    chat = tmp_path / "chat.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "synthetic.py"), str(chat), "--calls", "400"],
        check=True,
        capture_output=True,
    )
    flat = tmp_path / "flat.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "synthetic.py"), str(flat), "--calls", "200", "--flat"],
        check=True,
        capture_output=True,
    )
    paths = [ROOT / "sample_traces", ROOT / "tests" / "fixtures", hostile, chat, flat]
    done = subprocess.run([sys.executable, "-c", _CYCLES, *map(str, paths)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["calls"] > 600 and report["skipped"] > 0
    assert report["garbage"] < 2000, report  # a few objects per file, not one cycle per record


def _helps(monkeypatch, columns: int) -> list[str]:
    import argparse

    from rollout_graph import cli

    monkeypatch.setenv("COLUMNS", str(columns))
    top = cli.parser()
    verbs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    out = [top.format_help(), top.format_usage()]
    for name, verb in verbs.choices.items():
        out += [name, verb.format_help(), verb.format_usage()]
    return out


def test_every_verbs_help_is_argparses_at_every_width(monkeypatch):
    import argparse

    from rollout_graph import cli

    # the verbs' program name given to add_subparsers is the one argparse works out itself
    assert argparse.ArgumentParser(prog="rollout-graph").add_subparsers()._prog_prefix == "rollout-graph"
    longest = []
    for columns in (24, 50, 80, 132, 300):
        ours = _helps(monkeypatch, columns)
        with monkeypatch.context() as m:
            m.setattr(cli, "_HelpFormatter", argparse.HelpFormatter)
            theirs = _helps(monkeypatch, columns)
        assert ours == theirs, columns
        longest.append(max(len(line) for text in ours for line in text.splitlines()))
    assert longest[1] < longest[3] < longest[4]  # the terminal's width is followed


def test_building_the_inspect_parser_asks_no_terminal_width():
    code = (
        "import sys\nfrom rollout_graph.cli import parser\n"
        "parser('inspect').parse_args(['inspect', '--json', 'x'])\nprint('shutil' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "False"
