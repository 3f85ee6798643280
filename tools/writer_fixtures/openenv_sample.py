"""The bundled OpenEnv sample, written by OpenEnv 0.10.0's own code from the bundled vLLM sample.

Run with the writers' python: ``python openenv_sample.py AGENT_ROLLOUTS_JSONL OUT_JSON``
(``tools/make_writer_fixtures.py sample`` does). The calls of the ``fix-config-bug`` rollout in
``sample_traces/vllm/agent-rollouts.jsonl`` are replayed, in their recorded (arrival) order,
through OpenEnv's capture proxy (``create_app``): each request body as the harness sent it, and a
replay engine that answers with the recorded vLLM response. OpenEnv's own ingest builds the graph;
``GET /sessions/fix-config-bug.openenv/rollout?include_discarded=true&include_messages=true``
(``export_session``) is the file written. OpenEnv names a node ``uuid4().hex[:12]``; here the
``uuid4`` its server module calls hands it the recorded call id instead, so the sample's calls are
named as in the vLLM sample (``c01`` ...) and the variants can be compared call by call.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import httpx
from fastapi import FastAPI, Request

sys.path.insert(0, str(Path(__file__).resolve().parent))
import openenv.core.harness.capture.server as capture_server  # noqa: E402
from toy import serve  # noqa: E402

SOURCE, OUT = Path(sys.argv[1]), Path(sys.argv[2])
SESSION = "fix-config-bug"
records = [json.loads(line) for line in SOURCE.read_text().splitlines() if line.strip()]
records = [r for r in records if r.get("session_id") == SESSION]
responses = [r["response"] for r in records]
ids = [r["call_id"] for r in records]
model = records[0]["response"]["model"]

replay = FastAPI()


@replay.get("/v1/models")
async def models():
    return {"object": "list", "data": [{"id": model, "object": "model"}]}


@replay.post("/v1/chat/completions")
async def chat(request: Request):
    await request.json()
    return responses.pop(0)


servers = []
try:
    engine_server, engine_url = serve(replay)
    servers.append(engine_server)
    app = capture_server.create_app(llm_url=engine_url, model=model, engine="vllm", capture_level="tokens")
    # after create_app (its instance id is a uuid4 too): from here on, one uuid4 per ingested call
    capture_server.uuid = types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=ids.pop(0)))
    proxy, proxy_url = serve(app)
    servers.append(proxy)
    admin = httpx.Client(base_url=proxy_url, timeout=60)
    sid = admin.post("/sessions", json={"session_id": f"{SESSION}.openenv"}).json()["session_id"]
    harness = httpx.Client(base_url=proxy_url, headers={"Authorization": f"Bearer {sid}"}, timeout=60)
    for record in records:
        harness.post("/v1/chat/completions", json=record["request"]).raise_for_status()
    document = admin.get(f"/sessions/{sid}/rollout", params={"include_discarded": True, "include_messages": True})
    OUT.write_text(json.dumps(document.json(), ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")
finally:
    for s in servers:
        s.should_exit = True
