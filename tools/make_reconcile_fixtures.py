"""Write tests/reconcile/fixtures/: NeMo Gym's and NeMo-RL's own answers on our cases.

NeMo Gym's builder is not installable here (its wheel needs Python 3.12 and predates
``token_id_capture``) and CI has no network, so its functions are run ONCE from a fetched source
copy and their outputs committed (docs/reconcile.md, "How it is verified"). Nothing of either
repository is vendored: the copy is read from the folders given.

    git -C GYM_GIT archive 07d6b0d07b22fcf530b4c211dae2ee23100428e4 nemo_gym/token_id_capture | tar -x -C /tmp/gym
    git -C NEMO_RL_GIT archive 7ea279abfbeb698b092856d0dab61e7cf39bc909 nemo_rl/models/generation/openai_server_utils.py | tar -x -C /tmp/nemo-rl
    .venv/bin/python tools/make_reconcile_fixtures.py builders --gym /tmp/gym --nemo-rl /tmp/nemo-rl

``builders``: for every bundled sample, every rollout the real writers' fixtures hold
(tests/fixtures/writers/), every rollout of the capture layers' records (below) and generated
sessions (tests/reconcile/sessions.py, fixed seeds): the ``TokenEntry`` records NeMo Gym's sink
would write (rollout_graph.analysis.reconcile.nemo_gym ``token_entries``), then ``run_builder``
with ``prefix_merging`` and ``per_request`` (chains, quarantine, ``BuildNotes``) and
``consumer._assemble`` (``mask_sample``, metrics) on them, each chain's row as NeMo Gym's chain
holds it. For the generated sessions (whose chat template is known), NeMo-RL too:
``replace_prefix_tokens`` on each call (the template prefix rendered by the session's template),
then NeMo Gym's builder on the spliced records.

``readers`` (run first, in the writers venv with a source copy of Gym's ``nemo_gym`` package): the
capture layers' own records of recorded engine exchanges, NeMo Gym's (``nemo_gym_capture/``: its
capture middleware, ``TokenCaptureStore`` and ``merge_model_call_capture_into_record``) and the
rLLM gateway's (``rllm_gateway/``: ``build_trace_record`` through its ``SqliteTraceStore``); each
folder's README says how.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.reconcile.sessions import EOS, generate, render, write  # noqa: E402

GYM_COMMIT = "07d6b0d07b22fcf530b4c211dae2ee23100428e4"
NEMO_RL_COMMIT = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
SEEDS = range(120)
OUT = ROOT / "tests" / "reconcile" / "fixtures"


def load_gym(root: Path):
    """``nemo_gym.token_id_capture`` from a source copy (its package ``nemo_gym`` stubbed: the
    capture package needs only pydantic and orjson)."""
    package = types.ModuleType("nemo_gym")
    package.__path__ = [str(root / "nemo_gym")]
    sys.modules["nemo_gym"] = package
    import nemo_gym.token_id_capture.builder as builder
    import nemo_gym.token_id_capture.consumer as consumer
    import nemo_gym.token_id_capture.records as records

    return builder, consumer, records


def load_nemo_rl(root: Path):
    path = root / "nemo_rl" / "models" / "generation" / "openai_server_utils.py"
    spec = importlib.util.spec_from_file_location("openai_server_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digest(value: Any) -> str:
    """A short sha256 of a value's JSON (the fixtures keep digests of token arrays, not the arrays)."""
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()[:20]


def chain_row(chain) -> dict[str, Any]:
    """A Gym chain as one row: the root prompt, then each link's interstitial and generation
    (the arrays as digests, with their length and the ids' sum)."""
    ids: list[int] = list(chain.root_prompt)
    mask = [0] * len(ids)
    logprobs = [0.0] * len(ids)
    for step, link in enumerate(chain.links):
        if step:
            ids += link.interstitial
            mask += [0] * len(link.interstitial)
            logprobs += [0.0] * len(link.interstitial)
        ids += link.entry.generation_token_ids
        mask += [1] * len(link.entry.generation_token_ids)
        logprobs += list(link.entry.generation_log_probs)
    return {
        "chain_id": chain.chain_id,
        "model_call_ids": [link.entry.model_call_id for link in chain.links],
        "interstitial_lengths": [len(link.interstitial) for link in chain.links],
        "length": len(ids),
        "n_mask": sum(mask),
        "row_digest": digest([ids, mask, [round(x, 6) for x in logprobs]]),
    }


def build(gym, entries: list[dict[str, Any]], rollout_id: str) -> dict[str, Any]:
    builder, consumer, records = gym
    typed = [records.TokenEntry(**e) for e in entries]
    out: dict[str, Any] = {}
    for name in ("prefix_merging", "per_request"):
        result = builder.run_builder(typed, name)
        assembled = consumer._assemble(rollout_id, typed, name, "")
        out[name] = {
            "chains": [chain_row(c) for c in result.chains],
            "quarantined": list(result.quarantined),
            "notes": dataclasses.asdict(result.notes),
            "assembled": {
                "mask_sample": assembled["mask_sample"],
                "error": assembled.get("error"),
                "metrics": assembled.get("metrics"),
                "unresolved_retries": assembled.get("unresolved_retries"),
            },
        }
    return out


def nemo_rl_case(gym, splice, rollout, records: list[dict[str, Any]]) -> dict[str, Any]:
    """NeMo-RL on a generated session: each call's spliced prompt, then Gym's builder on them."""
    from rollout_graph.analysis.reconcile.nemo_gym import token_entries
    from rollout_graph.analysis.reconcile.nemo_rl import predecessor

    calls = rollout.calls
    tokenizer = types.SimpleNamespace(eos_token_id=EOS, decode=lambda ids: " ".join(map(str, ids)))
    by_id = {r["call_id"]: r for r in records}
    spliced: dict[str, list[int]] = {}
    out_calls = []
    failed: set[str] = set()
    for k, call in enumerate(calls):
        record = by_id[call.node_id]
        messages = record["request"]["messages"]
        tools = record["request"].get("tools")
        pred = predecessor(calls, k, list(rollout.topology.parents))
        entry: dict[str, Any] = {"node_id": call.node_id, "predecessor": None if pred is None else calls[pred].node_id}
        template = record["response"]["prompt_token_ids"]
        if template is None:  # no prompt ids: nothing to splice, and no record for Gym
            out_calls.append(entry)
            continue
        if pred is not None and calls[pred].node_id in failed:
            failed.add(call.node_id)
            entry["error"] = "continues a refused call"
        elif pred is None or calls[pred].node_id not in spliced:
            spliced[call.node_id] = list(template)
        else:
            last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
            prefix_ids = render(messages[: last + 1], tools, generation=False)
            model_prefix = spliced[calls[pred].node_id] + list(calls[pred].sampled_ids.tolist())
            entry["template_prefix_eos"] = prefix_ids.count(EOS)
            try:
                spliced[call.node_id] = splice.replace_prefix_tokens(tokenizer, model_prefix, prefix_ids, template)
            except AssertionError as exc:
                failed.add(call.node_id)
                entry["error"] = str(exc).splitlines()[0]
        if call.node_id in spliced:
            entry["prompt_length"] = len(spliced[call.node_id])
            entry["prompt_digest"] = digest(spliced[call.node_id])
        out_calls.append(entry)
    entries = []
    for e in token_entries(rollout.session_id, calls):
        if e["model_call_id"] in failed:
            continue
        entries.append({**e, "prompt_token_ids": spliced[e["model_call_id"]]})
    built = build(gym, entries, rollout.session_id)
    return {
        "eos_token_id": EOS,
        "calls": out_calls,
        "entries_digest": digest(entries),
        "prefix_merging": built["prefix_merging"],
    }


# the capture layers' records (NeMo Gym's TokenEntry and rollout records, the rLLM gateway's), read
# by their own readers: `readers` writes them first
CAPTURE_FOLDERS = ("nemo_gym_capture", "rllm_gateway")


def files_in(root: Path) -> list[Path]:
    """Every written file under ``root``, to be read one by one: the same session id recurs across files."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("README.md", "STABLE"))


def writer_files() -> list[Path]:
    """Every file the real writers wrote (tests/fixtures/writers/, each folder's README says how)."""
    return files_in(ROOT / "tests" / "fixtures" / "writers")


def builders(args: argparse.Namespace) -> int:
    """The builder fixtures (run with the project's venv)."""
    import rollout_graph as rg
    from rollout_graph.analysis.reconcile.nemo_gym import token_entries

    gym = load_gym(args.gym)
    splice = load_nemo_rl(args.nemo_rl)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    # (what the case is, the file when each file is read on its own, the rollouts)
    groups: list[tuple[dict[str, bool], Path | None, dict]] = [({}, None, rg.load(ROOT / "sample_traces"))]
    groups += [({"writer": True}, p, rg.load(p)) for p in writer_files()]
    groups += [({"capture": True}, p, rg.load(p)) for folder in CAPTURE_FOLDERS for p in files_in(OUT / folder)]
    for kind, path, loaded in groups:
        for sid, rollout in loaded.items():
            if not rollout.calls:
                continue
            entries = token_entries(rollout.session_id, rollout.calls)
            source = str(Path(path or rollout.calls[0].source).resolve().relative_to(ROOT))
            lines.append(
                {
                    "session_id": sid,
                    "source": {"sample": source, **kind},
                    "entries_digest": digest(entries),
                    **build(gym, entries, sid),
                }
            )
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for seed in SEEDS:
            n_calls = 1 + seed % 14
            records = generate(seed, n_calls)
            (rollout,) = rg.load(write(records, Path(folder) / f"gen-{seed}.jsonl")).values()
            entries = token_entries(rollout.session_id, rollout.calls)
            line = {
                "session_id": rollout.session_id,
                "source": {"generated": {"seed": seed, "n_calls": n_calls}},
                "entries_digest": digest(entries),
            }
            line.update(build(gym, entries, rollout.session_id))
            line["nemo_rl"] = nemo_rl_case(gym, splice, rollout, records)
            lines.append(line)
    path = args.out / "nemo_gym.jsonl"
    path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    print(f"{len(lines)} cases -> {path}")
    return 0


READER_SEEDS = range(12)  # generated sessions the capture writers record


def reader_sessions() -> list[tuple[str, list[dict[str, Any]]]]:
    """The engine exchanges the capture writers record: generated sessions and one rollout of the
    bundled vLLM sample (non-streamed chat completions), as (session, [{request, response, timing}])."""
    out = []
    for seed in READER_SEEDS:
        records = generate(seed, 4 + seed % 8, session=f"gen-{seed}")
        out.append(
            (
                f"gen-{seed}",
                [{"request": r["request"], "response": r["response"], "timing": r["timing"]} for r in records],
            )
        )
    sessions: dict[str, list[dict[str, Any]]] = {}
    for line in (ROOT / "sample_traces" / "vllm" / "agent-rollouts.jsonl").read_text().splitlines():
        r = json.loads(line)
        timing = {"started_at": r["metadata"]["started_at"], "ended_at": r["metadata"]["ended_at"]}
        request = dict(r["request"])
        sessions.setdefault(r["session_id"], []).append(
            {"request": request, "response": r["response"], "timing": timing}
        )
    out.append(("list-todos", sessions["list-todos"]))  # real SmolLM2 ids (the other session is 25 calls long)
    return out


def nemo_gym_capture(args: argparse.Namespace, sessions) -> None:
    """NeMo Gym's capture middleware (``_CaptureMiddleware``) in front of a model server that
    returns each recorded response with Gym's token bundle on the message and records it with
    ``capture_tokens``; then ``merge_model_call_capture_into_record`` for each rollout record."""
    sys.path.insert(0, str(args.gym_src))
    sys.modules.setdefault(
        "ray", types.SimpleNamespace(__version__="0")
    )  # imported at module level, used by servers only
    import nemo_gym.base_responses_api_model as model_server
    from nemo_gym.token_id_capture import capture_tokens
    from nemo_gym.token_id_capture.store import TokenCaptureStore
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    out = args.out / "nemo_gym_capture"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    calls_dir, tokens_dir = out / "capture", out / "tokens"
    answers: list[dict[str, Any]] = []

    async def chat(request: Request) -> JSONResponse:
        await request.json()  # the model server reads the request (the middleware records what it read)
        body = answers.pop(0)
        choice = body["choices"][0]
        message = choice["message"]
        content = (choice.get("logprobs") or {}).get("content")
        if body.get("prompt_token_ids") is not None and content is not None:
            # the token bundle Gym's vLLM model server puts on the message (return_token_id_information)
            message.update(
                prompt_token_ids=list(body["prompt_token_ids"]),
                generation_token_ids=list(choice["token_ids"]),
                generation_log_probs=[float(e["logprob"]) for e in content],
            )
        await capture_tokens(body)
        return JSONResponse(body)

    app = model_server._CaptureMiddleware(
        Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]),
        store=model_server.CaptureStore(calls_dir),
        model_server_name="policy_model",
        token_store=TokenCaptureStore(tokens_dir),
        token_capture_enabled=True,
    )
    client = TestClient(app)
    records = []
    for session, exchanges in sessions:
        for exchange in exchanges:
            answers.append(json.loads(json.dumps(exchange["response"])))
            done = client.post(
                f"/ng-rollout/{session}/training-token-capture/v1/chat/completions", json=exchange["request"]
            )
            assert done.status_code == 200, done.text
        record = {"_ng_rollout_id": session, "reward": 1.0, "response": {"output": []}}
        records.append(model_server.merge_model_call_capture_into_record(record, [calls_dir], include_payloads=True))
    (out / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    import shutil

    shutil.rmtree(calls_dir)  # the rollout records carry what the reader reads; the token files stay
    for extra in tokens_dir.iterdir():
        if not extra.name.endswith(".tokens.jsonl"):
            extra.unlink()
    print(f"{len(records)} rollouts -> {out}")


def rllm_gateway(args: argparse.Namespace, sessions) -> None:
    """rllm-model-gateway's trace records: ``build_trace_record`` on each exchange, stored by its
    ``SqliteTraceStore`` and read back with ``get_session_traces`` (what its API returns)."""
    import asyncio
    import tempfile

    from rllm_model_gateway.data_process import build_trace_record
    from rllm_model_gateway.store.sqlite_store import SqliteTraceStore

    out = args.out / "rllm_gateway"
    out.mkdir(parents=True, exist_ok=True)

    async def run() -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory() as folder:
            store = SqliteTraceStore(str(Path(folder) / "traces.db"))
            for session, exchanges in sessions:
                for exchange in exchanges:
                    timing = exchange["timing"]
                    trace = build_trace_record(
                        session,
                        exchange["request"],
                        exchange["response"],
                        1000.0 * (timing["ended_at"] - timing["started_at"]),
                    )
                    await store.store_trace(trace.trace_id, session, trace.model_dump())
            traces = [t for session, _ in sessions for t in await store.get_session_traces(session)]
            await store.close()
            return traces

    traces = asyncio.run(run())
    (out / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    print(f"{len(traces)} trace records -> {out}")


def readers(args: argparse.Namespace) -> int:
    """The capture layers' records (run with the writers venv, NeMo Gym's source on the path)."""
    sessions = reader_sessions()
    nemo_gym_capture(args, sessions)
    rllm_gateway(args, sessions)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("builders", help="NeMo Gym's builder and NeMo-RL's splice on our cases (the project's venv)")
    one.add_argument(
        "--gym",
        type=Path,
        required=True,
        help=f"a source copy of NVIDIA-NeMo/Gym's token_id_capture at {GYM_COMMIT[:12]}",
    )
    one.add_argument(
        "--nemo-rl", type=Path, required=True, help=f"a source copy of NVIDIA-NeMo/RL at {NEMO_RL_COMMIT[:12]}"
    )
    two = sub.add_parser(
        "readers", help="NeMo Gym's capture records and the rLLM gateway's trace records (the writers venv)"
    )
    two.add_argument(
        "--gym-src",
        type=Path,
        required=True,
        help=f"a source copy of NVIDIA-NeMo/Gym's nemo_gym package at {GYM_COMMIT[:12]}",
    )
    for command in (one, two):
        command.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    return builders(args) if args.what == "builders" else readers(args)


if __name__ == "__main__":
    raise SystemExit(main())
