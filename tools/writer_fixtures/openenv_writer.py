"""OpenEnv 0.10.0's own writers, run end to end on one 10-call rollout (tools/writer_fixtures/toy.py).

Run with the writers' python (``pip install openenv==0.10.0``); ``tools/make_writer_fixtures.py``
does. Everything written to OUT is produced by OpenEnv's code: its capture proxy
(``openenv.core.harness.capture.server.create_app``) in front of the toy engine, a scripted harness
talking chat completions to the proxy with the session id as its API key, then

- ``rollout.default.json``: ``GET /sessions/{id}/rollout`` (``export_session`` with its defaults);
- ``rollout.full.json``: the same with ``include_discarded`` and ``include_messages``;
- ``trace_entries.route.json``: ``GET /sessions/{id}/trace_entries`` (``{session_id, entries}``);
- ``to_trace_entries.json``: ``to_trace_entries(graph, document)`` (a JSON list);
- ``training_trace.json``: ``to_training_trace(graph, document).model_dump()``;
- ``rollout.eval.json``: the same harness against a ``capture_level="text"`` proxy
  (``include_messages``): no ids, message links;
- ``harbor/rollout-out.json``: ``openenv.harbor.rollout.run_rollout`` for real, with a stub
  ``harbor`` package whose ``Trial`` runs the scripted harness (reward 1.0): what ``openenv harbor
  rollout --out FILE`` writes (a list of ``HarborRolloutResult.model_dump()``);
- ``harbor/contract.json``: ``export_training_contract(result)``;
- ``harbor/runs/<id>.json``: the UI's run record, ``RunStore.save(LiveRun.record())`` (what
  ``~/.cache/openenv/harbor/runs/`` holds).

Randomness is fixed so that a run reproduces the committed files: the session ids are given, and
the ``uuid4`` / ``token_hex`` OpenEnv mints node ids, trial names and run ids with come from a
seeded generator. What stays non-deterministic (``wall_s``, ``phase_timings``, file paths under the
temporary trials folder) is normalised by the comparison (tests/conformance/regenerate.py).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import sys
import types
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy import MODEL, engine, run_harness, serve  # noqa: E402

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
SEED = random.Random(38)


class _SeededUUID(types.SimpleNamespace):
    """Stands in for the ``uuid`` module inside OpenEnv's modules: ``uuid4()`` from a seeded generator."""

    UUID = uuid.UUID

    @staticmethod
    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=SEED.getrandbits(128), version=4)


def _seeded_token_hex(n: int = 16) -> str:
    return SEED.getrandbits(8 * n).to_bytes(n, "big").hex()


def dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


import openenv.core.harness.capture.server as capture_server  # noqa: E402
import openenv.core.harness.capture.sessions as capture_sessions  # noqa: E402
from openenv.core.harness.capture import to_trace_entries, to_training_trace  # noqa: E402
from openenv.core.harness.capture.export import export_session  # noqa: E402
from openenv.core.harness.training import TrainingTrace  # noqa: E402

capture_server.uuid = _SeededUUID()
capture_sessions.secrets = types.SimpleNamespace(token_hex=_seeded_token_hex)

servers = []
work = OUT.parent / f".{OUT.name}-harbor-work"  # Harbor's task and trials folders, removed at the end


def stop_all() -> None:
    for s in servers:
        s.should_exit = True


def install_stub_harbor(capture_url: str) -> None:
    """A minimal ``harbor`` package: TrialConfig parts are plain holders; ``Trial.run`` drives the
    scripted harness with the session id the seam put in the agent's environment."""

    class Holder:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    cfg = types.ModuleType("harbor.models.trial.config")
    for name in ("AgentConfig", "EnvironmentConfig", "TaskConfig", "TrialConfig", "VerifierConfig"):
        setattr(cfg, name, type(name, (Holder,), {}))

    class Trial:
        def __init__(self, config):
            self.config = config

        @classmethod
        async def create(cls, config):
            return cls(config)

        async def run(self):
            blob = json.dumps({"env": self.config.agent.env, "kwargs": self.config.agent.kwargs}, default=str)
            key = re.search(r"\b(s[0-9a-f]{24})\b", blob).group(1)  # the minted session id = the API key
            await asyncio.to_thread(run_harness, capture_url, key)
            verifier = types.SimpleNamespace(rewards={"reward": 1.0})
            return types.SimpleNamespace(verifier_result=verifier, step_results=[], exception_info=None, trial_uri=None)

    trial = types.ModuleType("harbor.trial.trial")
    trial.Trial = Trial
    for name in ("harbor", "harbor.models", "harbor.models.trial", "harbor.trial"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["harbor.models.trial.config"] = cfg
    sys.modules["harbor.trial.trial"] = trial


try:
    engine_server, engine_url = serve(engine)
    servers.append(engine_server)

    # --- train: capture level tokens ------------------------------------------------------------
    app = capture_server.create_app(llm_url=engine_url, model=MODEL, engine="toy-vllm", capture_level="tokens")
    proxy, proxy_url = serve(app)
    servers.append(proxy)
    admin = httpx.Client(base_url=proxy_url, timeout=60)
    sid = admin.post("/sessions", json={"session_id": "calc-fix", "metadata": {"task": "calc-fix"}}).json()[
        "session_id"
    ]
    run_harness(proxy_url, sid)
    dump(OUT / "rollout.default.json", admin.get(f"/sessions/{sid}/rollout").json())
    full = admin.get(f"/sessions/{sid}/rollout", params={"include_discarded": True, "include_messages": True})
    dump(OUT / "rollout.full.json", full.json())
    dump(OUT / "trace_entries.route.json", admin.get(f"/sessions/{sid}/trace_entries").json())
    session = app.state.registry.get(sid)
    document = export_session(session, include_discarded=True, include_messages=True, capture_level="tokens")
    entries = to_trace_entries(session.graph, document)
    dump(OUT / "to_trace_entries.json", entries)
    trace = to_training_trace(session.graph, document)
    assert TrainingTrace.from_entries(entries) == trace
    dump(OUT / "training_trace.json", trace.model_dump())

    # --- eval: a proxy whose upstream level is text -----------------------------------------------
    eval_app = capture_server.create_app(llm_url=engine_url, model=MODEL, capture_level="text")
    eval_proxy, eval_url = serve(eval_app)
    servers.append(eval_proxy)
    eadmin = httpx.Client(base_url=eval_url, timeout=60)
    esid = eadmin.post("/sessions", json={"session_id": "calc-fix-eval"}).json()["session_id"]
    run_harness(eval_url, esid)
    dump(OUT / "rollout.eval.json", eadmin.get(f"/sessions/{esid}/rollout", params={"include_messages": True}).json())

    # --- Harbor ----------------------------------------------------------------------------------
    install_stub_harbor(proxy_url)
    import openenv.harbor.rollout as harbor_rollout  # noqa: E402
    from openenv.harbor.contract import export_training_contract  # noqa: E402
    from openenv.harbor.models import HarborRolloutResult  # noqa: E402
    from openenv.harbor.ui_runs import LiveRun, RunStore  # noqa: E402

    harbor_rollout.uuid = _SeededUUID()
    task_dir = work / "tasks" / "calc-fix"
    task_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(
        harbor_rollout.run_rollout(
            task_dir=task_dir,
            harness="opencode",
            sandbox="docker",
            registry=app.state.registry,
            intercept_url=proxy_url,
            model=MODEL,
            trials_dir=work / "trials",
            dataset="toy/calc",
            capture_level="tokens",
            inference=app.state.inference,
        )
    )
    assert isinstance(result, HarborRolloutResult) and result.ok, result.error
    # exactly what `openenv harbor rollout --out FILE` writes (openenv/cli/commands/harbor.py)
    harbor = OUT / "harbor"
    harbor.mkdir(parents=True, exist_ok=True)
    (harbor / "rollout-out.json").write_text(json.dumps([r.model_dump() for r in [result]], indent=2))
    print(f"wrote {harbor / 'rollout-out.json'}")
    dump(harbor / "contract.json", export_training_contract(result))
    run = LiveRun(
        id="20261022-120000-" + _seeded_token_hex(3),
        dataset="toy/calc",
        task_index=0,
        task_name="calc-fix",
        harness="opencode",
        sandbox="docker",
        model=MODEL,
        endpoint="server default",
        purpose="train",
        created=1792238400.0,
    )
    run.session_id, run.status = result.session_id, "done"
    run.result, run.error, run.finished = result.model_dump(mode="json"), result.error, 1792238412.5
    store = RunStore(harbor / "runs")
    store.save(run.record())
    print(f"wrote {harbor / 'runs' / (run.id + '.json')}")
finally:
    stop_all()
    shutil.rmtree(work, ignore_errors=True)
