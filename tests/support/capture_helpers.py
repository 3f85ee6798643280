"""Shared helpers for the capture proxy tests and benchmark: run the proxy, play a harness."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from rollout_graph.capture.server import CaptureConfig, create_app
from rollout_graph.capture.writer import RecordWriter
from tests.support.fake_upstream import serve_in_thread


@contextlib.contextmanager
def running_proxy(upstream: str, out: Path, **options: Any) -> Iterator[str]:
    """The proxy in a thread in front of ``upstream``; every record is on disk after the block."""
    config = CaptureConfig(upstream=upstream, out=out, **options)
    writer = RecordWriter.in_folder(out)
    with serve_in_thread(create_app(config, writer)) as url:
        yield url
    writer.close()


def read_records(out: Path) -> list[dict]:
    """Every record in every capture file of ``out`` (each line must be whole JSON)."""
    records = []
    for path in sorted(out.glob("*.jsonl")):
        text = path.read_text()
        assert text == "" or text.endswith("\n"), f"{path.name} ends in a half line"
        records += [json.loads(line) for line in text.splitlines()]
    return records


def sse_events(text: str) -> list[tuple[str | None, Any]]:
    """An SSE body as ``(event name, parsed data)`` pairs (``[DONE]`` kept as a string)."""
    events = []
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            joined = "\n".join(data)
            events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
    return events


def chat_text(body: dict) -> str:
    """The assistant text of a chat completion."""
    return body["choices"][0]["message"]["content"] or ""


def stream_text(text: str) -> tuple[str, list[dict]]:
    """Content and chunks of a chat SSE body."""
    chunks = [d for _, d in sse_events(text) if isinstance(d, dict)]
    content = "".join((c["choices"][0].get("delta") or {}).get("content") or "" for c in chunks if c.get("choices"))
    return content, chunks


def play_chat_harness(
    client: httpx.Client, path: str, turns: int, stream: bool, headers: dict | None = None, model: str = "m"
) -> list[Any]:
    """A harness that replays every answer and adds a user message: ``turns`` calls in one rollout."""
    messages: list[dict] = [{"role": "system", "content": "you are terse"}, {"role": "user", "content": "task one"}]
    seen = []
    for turn in range(turns):
        body = {"model": model, "messages": messages, "stream": stream, "max_tokens": 8}
        response = client.post(path, json=body, headers=headers or {})
        assert response.status_code == 200, response.text
        if stream:
            text, chunks = stream_text(response.text)
            seen.append(chunks)
        else:
            text = chat_text(response.json())
            seen.append(response.json())
        messages = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": f"next {turn}"}]
    return seen


# One client for every test: making an httpx client loads TLS certificates (~0.1 s each time).
http = httpx.Client(timeout=30)
