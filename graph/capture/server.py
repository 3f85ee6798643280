"""The recording proxy: a Starlette app on uvicorn between a harness and the engine.

Where it sits: the capture side of the flow: model calls in, one record per call out, the bytes the
loader reads (docs/formats.md, "Capture records"). ``rollout-graph capture`` calls :func:`serve`
(rollout_graph.cli.capture); tests call :func:`create_app`.

Recorded (POST, also under ``/session/<id>``): ``/v1/chat/completions`` and ``/v1/completions``
(forwarded with the capture fields: rollout_graph.capture.tokens), ``/v1/messages``, ``/v1/responses``
and the Gemini paths (translated: rollout_graph.capture.anthropic, .responses, .google). Everything
else passes through unrecorded. :class:`CaptureApp` handles a call; :class:`Recorder` writes its
record once, when the call ends, with secrets masked (rollout_graph.capture.sessions); the engine is
reached through rollout_graph.capture.upstream (httpx where that client cannot).

What the proxy changes: docs/live.md; its bounds and failed calls: docs/limits.md, "The capture proxy".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rollout_graph.capture import anthropic, google, responses
from rollout_graph.capture.media import might_hold_media, omit_media
from rollout_graph.capture.sessions import (
    BadSessionPath,
    has_dot_segment,
    mask_query,
    mask_secrets,
    recordable_headers,
    session_from_headers,
    split_session_path,
)
from rollout_graph.capture.tokens import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    Added,
    add_capture_fields,
    cap_max_tokens,
    pin_sampling,
    stripped_copy,
)
from rollout_graph.capture.upstream import LineSplitter, UpstreamClient, UpstreamResponse, UpstreamTooLarge, usable
from rollout_graph.capture.writer import RecordWriter

Upstream = httpx.Response | UpstreamResponse

MESSAGES_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
BUDGET_STOP_MESSAGE = "Step budget exhausted; stopping."
# A streamed call whose engine has not answered its head after this many seconds (by default) starts
# its stream for the harness at once (harnesses give up waiting for headers: gemini-cli after 60 s).
HEAD_WAIT = 10.0
RECORDED = {
    CHAT_PATH: "chat",
    COMPLETIONS_PATH: "completions",
    MESSAGES_PATH: "anthropic",
    RESPONSES_PATH: "responses",
}
_HOP_BY_HOP = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass
class CaptureConfig:
    """How the proxy runs: where the engine is, where records go, what to add."""

    upstream: str
    out: Path
    top_logprobs: int = 5
    timeout: float = 600.0  # seconds without a byte from the upstream before the call fails
    drain_seconds: float = 30.0  # how long in-flight calls may finish after Ctrl-C / SIGTERM
    session_headers: tuple[str, ...] = ()
    max_tokens: int | None = None  # cap on the harness's max_tokens (None: as asked)
    harness: str | None = None
    max_body_bytes: int = 64 << 20  # a request body bigger than this is answered 413
    client_timeout: float = 60.0  # seconds the harness may take to send each piece of its request
    max_response_bytes: int = 256 << 20  # an engine answer (decompressed, or a whole stream) bigger fails the call
    max_event_bytes: int = 64 << 20  # one SSE line from the engine bigger than this fails the call
    call_budget: int | None = None  # per session: model calls forwarded before the proxy answers a stop
    pin_sampling: dict[str, float] | None = None  # sampling keys set on every call, whatever the harness asked
    model: str | None = None  # the model every recorded call asks the engine for (None: the harness's)
    engine: dict[str, Any] | None = None  # the start-up probe's summary (capture/probe.py), stamped on records
    served_models: tuple[str, ...] = ()  # what the engine serves (from the probe), for the model fallback
    head_wait: float = HEAD_WAIT  # seconds a streamed call waits for the engine's head before its stream starts

    def options(self) -> dict[str, Any]:
        """The options that change what the engine is asked, as every record carries them."""
        out: dict[str, Any] = {}
        if self.call_budget is not None:
            out["call_budget"] = self.call_budget
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.pin_sampling:
            out["pin_sampling"] = dict(self.pin_sampling)
        if self.model is not None:
            out["model"] = self.model
        return out

    @property
    def upstream_base(self) -> str:
        """The engine's base URL without a trailing ``/v1`` (paths are forwarded with theirs)."""
        base = self.upstream.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base


class StreamTranslator(Protocol):
    """Turns upstream chat chunks into the SSE bytes the harness expects."""

    def feed(self, chunk: dict) -> list[bytes]:
        """Bytes for one upstream chunk (already stripped of capture fields)."""
        ...

    def close(self) -> list[bytes]:
        """Bytes after the upstream's last chunk."""
        ...

    def fail(self, message: str) -> list[bytes]:
        """Bytes telling the harness the stream broke (may be empty: then the connection is cut)."""
        ...


class _ChatStream:
    """Chat and completions streams go back as they came, chunk by chunk."""

    def feed(self, chunk: dict) -> list[bytes]:
        return [b"data: " + orjson.dumps(chunk) + b"\n\n"]

    def close(self) -> list[bytes]:
        return []

    def fail(self, message: str) -> list[bytes]:
        return []


@dataclass
class Dialect:
    """How one recorded endpoint talks to the upstream and back."""

    name: str
    upstream_path: str
    to_upstream: Callable[[dict], dict]
    from_upstream: Callable[[dict, dict], dict]
    error_body: Callable[[int, str, Any], Any]
    stream: Callable[[dict], StreamTranslator]
    translated: bool


def _openai_error(status: int, message: str, upstream: Any) -> Any:
    return (
        upstream if upstream is not None else {"error": {"message": message, "type": "upstream_error", "code": status}}
    )


DIALECTS = {
    "chat": Dialect("chat", CHAT_PATH, dict, lambda r, _: r, _openai_error, lambda _: _ChatStream(), translated=False),
    "completions": Dialect(
        "completions", COMPLETIONS_PATH, dict, lambda r, _: r, _openai_error, lambda _: _ChatStream(), translated=False
    ),
    "anthropic": Dialect(
        "anthropic",
        CHAT_PATH,
        anthropic.to_chat,
        anthropic.from_chat,
        anthropic.error_body,
        anthropic.StreamTranslator,
        translated=True,
    ),
    "responses": Dialect(
        "responses",
        CHAT_PATH,
        responses.to_chat,
        responses.from_chat,
        responses.error_body,
        responses.StreamTranslator,
        translated=True,
    ),
}


def google_dialect(path: google.GooglePath, sse: bool) -> Dialect:
    """The Gemini dialect for one call: the model and the streaming come from its path."""
    return Dialect(
        "google",
        CHAT_PATH,
        lambda body: google.to_chat(body, path.model, path.streamed),
        google.from_chat,
        google.error_body,
        lambda body: google.StreamTranslator(body, sse),
        translated=True,
    )


@dataclass
class Recorder:
    """Call ids, the default session, and records of calls still in flight."""

    writer: RecordWriter
    default_session: str
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    open_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_record: Callable[[dict[str, Any]], None] | None = None  # told about each written record
    _counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def start(self, record: dict[str, Any]) -> dict[str, Any]:
        """Give ``record`` a call id and hold it until :meth:`finish`."""
        call_id = f"{self.run_id}-{next(self._counter):05d}"
        record["call_id"] = call_id
        self.open_calls[call_id] = record
        return record

    def finish(self, record: dict[str, Any]) -> None:
        """Write a call's record (once; a second finish is ignored)."""
        if self.open_calls.pop(record["call_id"], None) is None:
            return
        record["ended_at"] = time.time()
        record["latency_s"] = round(record["ended_at"] - record["started_at"], 6)
        self.writer.write(record)
        if self.on_record is not None:
            self.on_record(record)

    def abandon_open(self, reason: str) -> int:
        """Write every call still in flight with ``error = reason``; returns how many."""
        n = 0
        for record in list(self.open_calls.values()):
            record.setdefault("error", reason)
            self.finish(record)
            n += 1
        return n


def _wire(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """Header pairs as the bytes that came: the server decoded them as latin-1, so this is exact.

    (httpx would encode ``str`` values as ASCII and fail on ``X-Title: Café app``.)
    """
    return [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers.items()]


def _forward_headers(request: Request, translated: bool) -> list[tuple[bytes, bytes]]:
    """Headers for the upstream: the harness's own (credentials included, never recorded)."""
    if translated:
        # A translated call is a new chat request: keep only its credentials (Gemini's key may
        # come as x-goog-api-key or ?key=, both become the engine's bearer token).
        headers = {"content-type": "application/json"}
        auth = request.headers.get("authorization")
        key = (
            request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or request.query_params.get("key")
        )
        if auth:
            headers["authorization"] = auth
        elif key:
            headers["authorization"] = f"Bearer {key}"
        return _wire(headers)
    skip = _HOP_BY_HOP | {"accept-encoding"}
    return _wire({k: v for k, v in request.headers.items() if k.lower() not in skip})


class BodyTooLarge(Exception):
    """The request body is over ``max_body_bytes``."""


class ClientTooSlow(Exception):
    """The harness stopped sending its request body for longer than ``client_timeout``."""


async def read_body(request: Request, cap: int, timeout: float) -> bytes:
    """The request body, read in pieces: never more than ``cap`` bytes held, each piece in time.

    Raises:
        BodyTooLarge: the declared or the received size is over ``cap``.
        ClientTooSlow: no piece arrived for ``timeout`` seconds.
        starlette.requests.ClientDisconnect: the harness hung up while sending.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise BodyTooLarge(int(declared))
    parts: list[bytes] = []
    size = 0
    pieces = request.stream().__aiter__()
    while True:
        try:
            async with asyncio.timeout(timeout):  # no task per piece, unlike asyncio.wait_for
                piece = await pieces.__anext__()
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise ClientTooSlow() from None
        size += len(piece)
        if size > cap:
            raise BodyTooLarge(size)
        parts.append(piece)
    return b"".join(parts)


_EXPECTED = (httpx.HTTPError, ClientDisconnect, asyncio.CancelledError, ConnectionError, TimeoutError)


class _OneLine(logging.Filter):
    """uvicorn logs an exception leaving the app with its traceback; expected ones get one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and isinstance(exc, _EXPECTED):
            record.msg = f"rollout-graph capture: {getattr(exc, 'capture_note', None) or _describe(exc)}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def install_log_filter() -> None:
    """Expected events in one line in uvicorn's error log (idempotent)."""
    for name in ("uvicorn.error", "uvicorn"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLine) for f in logger.filters):
            logger.addFilter(_OneLine())


def _parse(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content.decode("utf-8", "replace")[:100_000]


class CaptureApp:
    """The request handlers, bound to one upstream client and one recorder."""

    def __init__(self, config: CaptureConfig, recorder: Recorder) -> None:
        self.config = config
        self.recorder = recorder
        self.calls_per_session: dict[str, int] = {}  # calls forwarded per session (--call-budget)
        self.client: httpx.AsyncClient | None = None
        self._urls: dict[str, httpx.URL] = {}
        # Recorded calls go through the lean client (capture/upstream.py) unless the engine is
        # reached through an HTTP proxy from the environment; everything else through httpx.
        self.fast: UpstreamClient | None = None
        if usable(config.upstream_base):
            self.fast = UpstreamClient(
                config.upstream_base, config.timeout, connect=10.0, keepalive_expiry=2.0, max_idle=200
            )

    def _upstream_url(self, path: str) -> httpx.URL:
        """The engine's absolute URL for ``path``, parsed once (httpx parses a relative one per call)."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._client().base_url.join(path.lstrip("/"))
        return url

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            timeout = httpx.Timeout(self.config.timeout, connect=10.0)
            # Idle connections are dropped before the engine's own keep-alive timeout (uvicorn,
            # which vLLM runs on: 5 s) so a request never lands on a connection being closed.
            limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200, keepalive_expiry=2.0)
            self.client = httpx.AsyncClient(base_url=self.config.upstream_base, timeout=timeout, limits=limits)
        return self.client

    async def aclose(self) -> None:
        """Close the upstream client."""
        if self.client is not None:
            await self.client.aclose()
        if self.fast is not None:
            await self.fast.aclose()

    async def _send(self, target: str, headers: list[tuple[bytes, bytes]], content: bytes) -> Upstream:
        """POST a recorded call to the engine; the response once its head came (the body not read)."""
        if self.fast is not None:
            return await self.fast.send(target, headers, content)
        client = self._client()
        url = target if "?" in target else self._upstream_url(target)
        upstream_request = client.build_request("POST", url, content=content, headers=headers)
        try:
            return await client.send(upstream_request, stream=True)
        except httpx.RemoteProtocolError:
            # A pooled connection the engine closed as it was reused: nothing was processed.
            return await client.send(upstream_request, stream=True)

    async def handle(self, request: Request) -> Response:
        """Every request: recorded endpoints by path, everything else passed through."""
        try:
            prefix_session, path = split_session_path(request.url.path, request.scope.get("raw_path"))
        except BadSessionPath as exc:
            return _refused(str(exc))
        if has_dot_segment(path):
            return _refused(f"the path {path[:200]!r} walks up with '..': never forwarded to the engine")
        trimmed = path.rstrip("/")
        dialect = RECORDED.get(trimmed)
        gpath = google.parse_path(trimmed) if dialect is None and "/models/" in trimmed else None
        if request.method == "POST":
            if dialect is not None:
                return await self.recorded(request, DIALECTS[dialect], trimmed, prefix_session)
            if trimmed == COUNT_TOKENS_PATH:
                return await self.count_tokens(request, None)
            if gpath is not None and gpath.method == google.COUNT:
                return await self.count_tokens(request, gpath)
            if gpath is not None:
                sse = gpath.streamed and request.query_params.get("alt") == "sse"
                return await self.recorded(
                    request, google_dialect(gpath, sse), trimmed, prefix_session, streamed=gpath.streamed
                )
        if prefix_session is not None and dialect is None and gpath is None:
            inner = next((p for p in (*RECORDED, COUNT_TOKENS_PATH) if trimmed.endswith(p)), None)
            if inner is not None or google.parse_path(trimmed[trimmed.find("/v1") :]) is not None:
                return _refused(
                    f"/session/{prefix_session}{path[:200]} is not a model call: a session id in the URL is one "
                    "path segment (no '/'); name the rollout with letters, digits and . _ - : @ + = ~"
                )
        return await self.passthrough(request, path)

    async def _tokenize(self, chat: dict, headers: list[tuple[bytes, bytes]]) -> int | None:
        """The prompt length of a chat request as the engine's ``/tokenize`` counts it, or None."""
        tokenize: dict[str, Any] = {
            "model": chat.get("model"),
            "messages": chat["messages"],
            "add_generation_prompt": True,
        }
        if chat.get("tools"):
            tokenize["tools"] = chat["tools"]
        try:
            upstream = await self._client().post("/tokenize", content=orjson.dumps(tokenize), headers=headers)
            count = upstream.json().get("count") if upstream.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    async def count_tokens(self, request: Request, gpath: google.GooglePath | None) -> Response:
        """Anthropic ``count_tokens`` (Claude Code) and Gemini ``countTokens`` (gemini-cli), answered
        by the engine's ``/tokenize``, else estimated at four characters a token; never recorded."""
        error_body = anthropic.error_body if gpath is None else google.error_body
        try:
            body = _parse(await read_body(request, self.config.max_body_bytes, self.config.client_timeout))
        except BodyTooLarge:
            return JSONResponse(error_body(413, self._too_large()), status_code=413)
        except ClientTooSlow:
            return JSONResponse(error_body(408, self._too_slow()), status_code=408)
        except ClientDisconnect:
            return Response(status_code=400)
        if not isinstance(body, dict):
            return JSONResponse(error_body(400, "request body is not a JSON object"), status_code=400)
        try:
            chat = anthropic.to_chat(body) if gpath is None else google.count_request(body, gpath.model)
            chat.pop(responses.TRANSLATION, None)
            chat["model"] = self._served_model(str(chat.get("model") or ""), translated=True)[0]
        except Exception as exc:  # noqa: BLE001 - a body nobody foresaw: an answer, not a traceback
            return JSONResponse(error_body(400, f"cannot read the request: {_describe(exc)}"), status_code=400)
        count = await self._tokenize(chat, _forward_headers(request, True))
        if count is None:  # no /tokenize (SGLang, a hosted engine): an estimate beats a failure
            count = max(1, len(orjson.dumps([chat["messages"], chat.get("tools")])) // 4)
        return JSONResponse({"input_tokens": count} if gpath is None else google.count_body(count))

    def _served_model(self, asked: str, translated: bool) -> tuple[str, str | None]:
        """The model to ask the engine for, and a note when it is not the one the harness asked.

        ``--model`` wins; else a translated dialect's model that the engine does not serve (a
        harness asking for ``gemini-2.5-pro`` or ``claude-sonnet-4``) becomes the engine's only
        model, when the start-up probe found exactly one.
        """
        if self.config.model is not None:
            model = self.config.model
            why = "capture --model"
        elif translated and len(self.config.served_models) == 1 and asked not in self.config.served_models:
            model = self.config.served_models[0]
            why = "the engine serves only it"
        else:
            return asked, None
        return model, None if model == asked else f"model {asked!r} -> {model!r} ({why})"

    async def passthrough(self, request: Request, path: str) -> Response:
        """Forward anything else unrecorded (``GET /v1/models``, health checks, ...)."""
        url = path + (f"?{request.url.query}" if request.url.query else "")
        headers = _wire({k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP})
        try:
            content = await read_body(request, self.config.max_body_bytes, self.config.client_timeout)
        except BodyTooLarge:
            return JSONResponse(_openai_error(413, self._too_large(), None), status_code=413)
        except ClientTooSlow:
            return JSONResponse(_openai_error(408, self._too_slow(), None), status_code=408)
        except ClientDisconnect:
            return Response(status_code=400)
        try:
            upstream = await self._client().request(request.method, url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            return JSONResponse(_openai_error(502, f"upstream unreachable: {_describe(exc)}", None), status_code=502)
        out = Response(upstream.content, status_code=upstream.status_code)
        skip = {h.encode() for h in _HOP_BY_HOP | {"content-encoding", "content-length"}}
        out.raw_headers += [(k.lower(), v) for k, v in upstream.headers.raw if k.lower() not in skip]
        return out

    def _too_large(self) -> str:
        return (
            f"request body is larger than {self.config.max_body_bytes:,} bytes, the capture proxy's cap "
            "(capture --max-body-bytes); it was not forwarded"
        )

    def _too_slow(self) -> str:
        return f"the request body stalled for more than {self.config.client_timeout:g} s (capture proxy client timeout)"

    async def recorded(
        self,
        request: Request,
        dialect: Dialect,
        path: str,
        prefix_session: str | None,
        streamed: bool | None = None,
    ) -> Response:
        """A model call: forward with capture fields, answer in the harness's dialect, record.

        ``streamed``: whether the harness asked for a stream, when its path says so (Gemini);
        else the body's ``stream`` does.
        """
        session = (
            prefix_session
            or session_from_headers(request.headers, self.config.session_headers)
            or self.recorder.default_session
        )
        record: dict[str, Any] = {"session_id": session, "call_id": None, "endpoint": path, "dialect": dialect.name}
        if self.config.harness:
            record["harness"] = self.config.harness
        record["started_at"] = time.time()
        record["headers"] = recordable_headers(request.headers)
        if request.url.query:
            record["query"] = mask_query(request.url.query)
        if self.config.engine is not None:
            record["engine"] = self.config.engine
        options = self.config.options()
        if options:
            record["capture_options"] = options
        self.recorder.start(record)
        try:
            raw = await read_body(request, self.config.max_body_bytes, self.config.client_timeout)
        except BodyTooLarge:
            record["request"] = None
            return self._fail(record, dialect, 413, self._too_large(), None)
        except ClientTooSlow:
            record["request"] = None
            return self._fail(record, dialect, 408, self._too_slow(), None)
        except ClientDisconnect:
            record["request"] = None
            return self._fail(record, dialect, 400, "the harness hung up while sending its request", None)
        body = _parse(raw)
        media: list[dict[str, Any]] | None = [] if might_hold_media(raw) else None
        del raw
        if not isinstance(body, dict):
            record["request"] = self._recordable(body, media, "request")
            return self._fail(record, dialect, 400, "request body is not a JSON object", None)
        record["request"] = self._recordable(body, media, "request")  # the upstream gets the body as sent
        streamed = bool(body.get("stream")) if streamed is None else streamed
        record["stream"] = streamed
        if media:
            record["media"] = media
        if self._over_budget(session):
            return self._budget_stop(record, dialect, body, streamed)
        try:
            return await self._forward(request, record, dialect, body, streamed, media)
        except Exception as exc:  # a bug or a body nobody foresaw: the harness gets an answer, the file a record
            return self._fail(record, dialect, 502, f"proxy error: {type(exc).__name__}: {exc}", None)

    @staticmethod
    def _recordable(body: Any, media: list[dict[str, Any]] | None, where: str) -> Any:
        """A body as a record keeps it: secrets masked, inline media (when ``media`` is a list)
        replaced by placeholders and described in ``media``."""
        masked = mask_secrets(body)
        return masked if media is None else omit_media(masked, where, media)

    def _over_budget(self, session: str) -> bool:
        """Count a call against its session's budget; True once the budget is spent."""
        if self.config.call_budget is None:
            return False
        used = self.calls_per_session.get(session, 0)
        if used >= self.config.call_budget:
            return True
        self.calls_per_session[session] = used + 1
        return False

    def _budget_stop(self, record: dict, dialect: Dialect, body: dict, streamed: bool) -> Response:
        """The answer once a session spent ``--call-budget``: a plain stop in the harness's dialect
        (never forwarded), recorded as a call that did not reach the engine."""
        budget = self.config.call_budget
        record["budget_stop"] = True
        record["error"] = (
            f"call budget exhausted: the session made its {budget} model call(s) (capture --call-budget {budget}); "
            "answered with a stop, not forwarded to the engine"
        )
        record["status"] = 200
        stop = budget_stop_response(str(body.get("model") or ""), dialect.name == "completions")
        record["response"] = stop
        self.recorder.finish(record)
        if streamed:
            translator = dialect.stream(body)
            completions = dialect.name == "completions"  # a completions chunk has the body's shape
            pieces = translator.feed(stop if completions else _as_one_chunk(stop)) + translator.close()
            if not dialect.translated:
                pieces.append(b"data: [DONE]\n\n")
            media_type = (
                "application/json" if isinstance(translator, google.StreamTranslator) and not translator.sse else None
            )
            return Response(b"".join(pieces), media_type=media_type or "text/event-stream")
        return JSONResponse(dialect.from_upstream(stop, body))

    async def _forward(
        self, request: Request, record: dict, dialect: Dialect, body: dict, streamed: bool, media: list | None = None
    ) -> Response:
        chat_body = dialect.to_upstream(body)
        notes = chat_body.pop(responses.TRANSLATION, None)  # what a translation changed of the harness's offer
        if notes:
            record["translation"] = notes
        model, change = self._served_model(str(chat_body.get("model") or ""), dialect.translated)
        if change is not None:
            chat_body["model"] = model
            record["behaviour_changed"] = [change]
        if dialect.translated:
            _reasoning_for_engine(chat_body)
        submitted, added = add_capture_fields(chat_body, dialect.upstream_path, self.config.top_logprobs)
        cap_max_tokens(submitted, self.config.max_tokens)
        pin_sampling(submitted, self.config.pin_sampling)
        if streamed and dialect.translated:
            submitted["stream_options"] = {**(submitted.get("stream_options") or {}), "include_usage": True}
        record["submitted_request"] = self._recordable(submitted, None if media is None else [], "submitted_request")
        query = request.url.query  # ?api-version=... reaches the engine as sent (Gemini's query is its own)
        target = dialect.upstream_path + f"?{query}" if query and dialect.name != "google" else dialect.upstream_path
        sending: Awaitable[Upstream] = self._send(
            target, _forward_headers(request, dialect.translated), orjson.dumps(submitted)
        )
        if streamed:
            # A slow engine (a long prompt on a CPU) may take minutes to answer its head; harnesses
            # give up waiting for response headers (gemini-cli after 60 s). After head_wait seconds
            # the stream starts for the harness, and whatever the engine then answers goes into it.
            task = asyncio.ensure_future(sending)
            done, _ = await asyncio.wait({task}, timeout=self.config.head_wait)
            if not done:
                media_type = _stream_media_type(dialect, body)
                return EventStream(self._late_stream(record, dialect, task, added, body), media_type=media_type)
            sending = task
        try:
            upstream = await sending
        except httpx.TimeoutException as exc:
            return self._fail(record, dialect, 504, f"upstream timed out: {type(exc).__name__}", None)
        except httpx.HTTPError as exc:
            return self._fail(record, dialect, 502, f"upstream unreachable: {type(exc).__name__}: {exc}", None)
        record["status"] = upstream.status_code
        is_sse = upstream.headers.get("content-type", "").startswith("text/event-stream")
        if upstream.status_code == 200 and is_sse:
            return EventStream(
                self._stream(record, dialect, upstream, added, body), media_type=_stream_media_type(dialect, body)
            )
        try:
            content = await read_bounded(upstream, self.config.max_response_bytes)
        except UpstreamTooLarge as exc:
            return self._fail(record, dialect, 502, str(exc), None)
        except httpx.TimeoutException as exc:
            return self._fail(record, dialect, 504, f"upstream timed out: {type(exc).__name__}", None)
        except httpx.HTTPError as exc:
            return self._fail(record, dialect, 502, f"upstream failed mid-response: {type(exc).__name__}", None)
        finally:
            await upstream.aclose()
        parsed = _parse(content)
        if upstream.status_code != 200:
            record["response"] = parsed if isinstance(parsed, dict) else {"error": parsed}
            message = _error_message(parsed)
            record["error"] = f"upstream HTTP {upstream.status_code}"
            if is_context_overflow(upstream.status_code, parsed):  # named, so the skip reason says what ran out
                record["error"] += f" (context_budget_exhausted: {message[:300]})"
            self.recorder.finish(record)
            if dialect.translated:
                return JSONResponse(dialect.error_body(upstream.status_code, message, None), upstream.status_code)
            return Response(
                content,
                status_code=upstream.status_code,
                media_type=upstream.headers.get("content-type", "application/json"),
            )
        record["response"] = parsed
        if not isinstance(parsed, dict):
            return self._fail(record, dialect, 502, "upstream answered with something that is not JSON", None)
        answer = dialect.from_upstream(stripped_copy(parsed, added), body)
        # The record is written once the answer went out (off the harness's clock); a harness
        # hanging up meanwhile still gets it written (BackgroundTask runs after the send, and
        # the lifespan writes any record left open).
        after = BackgroundTask(self._finish_later, record)
        if dialect.translated and streamed:
            # The harness asked for a stream but the engine answered in one piece: replay it as events.
            translator = dialect.stream(body)
            pieces = translator.feed(_as_one_chunk(parsed)) + translator.close()
            return Response(b"".join(pieces), media_type=_stream_media_type(dialect, body), background=after)
        if dialect.translated:
            return JSONResponse(answer, background=after)
        return Response(
            content if not added.anything else orjson.dumps(answer), media_type="application/json", background=after
        )

    async def _finish_later(self, record: dict) -> None:
        self.recorder.finish(record)

    async def _late_stream(
        self, record: dict, dialect: Dialect, sending: asyncio.Future, added: Added, body: dict
    ) -> AsyncIterator[bytes]:
        """A stream the harness got before the engine answered: the engine's stream once it
        comes, else its failure as the dialect's error event (the status is already 200)."""
        translator = dialect.stream(body)

        def failed(message: str) -> list[bytes]:
            record["error"] = message
            self.recorder.finish(record)
            return translator.fail(message) or [_chat_error_event(message)]

        try:
            upstream = await sending
        except httpx.TimeoutException as exc:
            record["status"] = 504
            for piece in failed(f"upstream timed out: {type(exc).__name__}"):
                yield piece
            return
        except httpx.HTTPError as exc:
            record["status"] = 502
            for piece in failed(f"upstream unreachable: {type(exc).__name__}: {exc}"):
                yield piece
            return
        except BaseException:  # the harness hung up while the engine read the prompt
            sending.cancel()
            record.setdefault("error", "stream ended early: the harness hung up before the engine answered")
            self.recorder.finish(record)
            raise
        record["status"] = upstream.status_code
        if upstream.status_code == 200 and upstream.headers.get("content-type", "").startswith("text/event-stream"):
            async for piece in self._stream(record, dialect, upstream, added, body):
                yield piece
            return
        try:
            content = await read_bounded(upstream, self.config.max_response_bytes)
        except httpx.HTTPError as exc:
            reason = (
                str(exc) if isinstance(exc, UpstreamTooLarge) else f"upstream failed mid-response: {_describe(exc)}"
            )
            for piece in failed(reason):
                yield piece
            return
        finally:
            await upstream.aclose()
        parsed = _parse(content)
        if upstream.status_code != 200 or not isinstance(parsed, dict):
            record["response"] = parsed if isinstance(parsed, dict) else {"error": parsed}
            reason = f"upstream HTTP {upstream.status_code}"
            if upstream.status_code == 200:
                reason = "upstream answered with something that is not JSON"
            elif is_context_overflow(upstream.status_code, parsed):
                reason += f" (context_budget_exhausted: {_error_message(parsed)[:300]})"
            for piece in failed(reason):
                yield piece
            return
        record["response"] = parsed  # the engine answered in one piece: replayed as the stream's events
        chunk = _as_one_chunk(parsed if dialect.translated else stripped_copy(parsed, added))
        pieces = translator.feed(chunk) + translator.close()
        if not dialect.translated:
            pieces.append(b"data: [DONE]\n\n")
        self.recorder.finish(record)
        for piece in pieces:
            yield piece

    def _fail(self, record: dict, dialect: Dialect, status: int, message: str, upstream: Any) -> Response:
        body = dialect.error_body(status, message, upstream)
        record["status"] = status
        record["error"] = message
        record.setdefault("response", {"error": {"message": message, "code": status}})
        self.recorder.finish(record)
        return JSONResponse(body, status_code=status)

    async def _stream(
        self, record: dict, dialect: Dialect, upstream: Upstream, added: Added, body: dict
    ) -> AsyncIterator[bytes]:
        chunks: list[Any] = []
        record["response"] = chunks
        translator = dialect.stream(body)
        state = {"first": True}

        def handle(raw: bytes, out: list[bytes]) -> bool:
            """One SSE line: record it, add what the harness gets to ``out``; True: the stream failed."""
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line.startswith(b"data:"):
                if line and not dialect.translated:
                    out.append(line + b"\n")  # SSE comments and fields pass through
                return False
            data = line[5:].strip()
            if state["first"]:
                record["ttft_s"] = round(time.time() - record["started_at"], 6)
                state["first"] = False
            if data == b"[DONE]":
                chunks.append("data: [DONE]")
                if not dialect.translated:
                    out.append(b"data: [DONE]\n\n")
                return False
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                chunks.append(line.decode("utf-8", "replace"))
                if not dialect.translated:
                    out.append(line + b"\n\n")
                return False
            chunks.append(chunk)
            if not isinstance(chunk, dict):
                return False
            if chunk.get("error") and not chunk.get("choices"):
                # The engine reported a failure inside the stream (vLLM does): a failed call.
                record["error"] = f"upstream error in stream: {_error_message(chunk)}"
                if dialect.translated:
                    out += translator.fail(record["error"])
                    return True
            # A translated dialect builds new events (the capture fields never reach the
            # harness); chat chunks go back without what the proxy added.
            stripped = added.anything and not dialect.translated
            try:
                out += translator.feed(stripped_copy(chunk, added) if stripped else chunk)
            except Exception as exc:  # noqa: BLE001 - one odd chunk ({"choices": 7}) never cuts the stream
                note = f"stream chunk {len(chunks)} skipped: {_describe(exc)}"
                record.setdefault("stream_notes", []).append(note)
            return False

        splitter = LineSplitter(self.config.max_event_bytes)
        cap, total = self.config.max_response_bytes, 0
        try:
            # Bytes as they come, cut into lines here: every event of one read from the engine is
            # handled, then sent to the harness in one piece (one send, not one per event). A line
            # spread over many reads is joined once, when its newline comes (linear in its size).
            async for piece_read in upstream.aiter_bytes():
                total += len(piece_read)
                if total > cap:
                    raise UpstreamTooLarge(_too_large_answer(cap))
                out: list[bytes] = []
                failed = any(handle(line, out) for line in splitter.lines(piece_read))
                if out:
                    yield b"".join(out)
                if failed:
                    return
            last = splitter.rest()
            if last is not None:  # a last line without its newline
                out = []
                failed = handle(last, out)
                if out:
                    yield b"".join(out)
                if failed:
                    return
            for piece in translator.close():
                yield piece
        except UpstreamTooLarge as exc:
            record["error"] = str(exc)
            pieces = translator.fail(record["error"]) or [_chat_error_event(record["error"])]
            self.recorder.finish(record)
            for piece in pieces:
                yield piece
        except httpx.HTTPError as exc:
            record["error"] = f"upstream stream cut: {_describe(exc)}"
            pieces = translator.fail(record["error"])
            self.recorder.finish(record)
            for piece in pieces:
                yield piece
            if not pieces:
                exc.capture_note = f"call {record['call_id']}: {record['error']}; the harness's stream is cut too"  # type: ignore[attr-defined]
                raise  # cut the harness's connection too, as the upstream cut ours
        except Exception as exc:  # noqa: BLE001 - a proxy bug mid-stream: the harness hears of it
            record["error"] = f"proxy error in stream: {_describe(exc)}"
            pieces = translator.fail(record["error"])
            self.recorder.finish(record)
            for piece in pieces:
                yield piece
            if not pieces:
                raise
        except BaseException as exc:  # the harness hung up (cancelled) or the proxy is stopping
            record.setdefault("error", f"stream ended early: {type(exc).__name__}")
            raise
        else:
            # The stream ended normally: the record is assembled and queued right after the
            # harness got the stream's last bytes (the response sends them in this same step of
            # the event loop, before the callback runs), so its serialisation is off the
            # harness's clock. Any other ending records it at once (below).
            asyncio.get_running_loop().call_soon(self.recorder.finish, record)
        finally:
            await upstream.aclose()
            if "error" in record:
                self.recorder.finish(record)


class EventStream(Response):
    """A server-sent event stream to the harness: Starlette's StreamingResponse without anyio.

    Why: on uvicorn's h11 server StreamingResponse runs an anyio task group per call, a visible share
    of the proxy's CPU. Here one asyncio task cancels the response's task when the harness hangs up;
    the stream's generator records the call and closes the engine's response, and the response ends
    normally (a hang-up is not an error).
    """

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes], media_type: str = "text/event-stream") -> None:
        self.body_iterator = content
        self.status_code = 200
        self.background = None
        self.media_type = media_type
        self.init_headers({"cache-control": "no-cache"})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Send the events as they come; stop (without an error) when the harness hangs up."""
        task = asyncio.current_task()
        ending = False
        hung_up = False

        async def listen() -> None:
            nonlocal hung_up
            while (await receive())["type"] != "http.disconnect":
                pass
            if not ending and task is not None:
                hung_up = True
                task.cancel()

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            ending = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not hung_up or task is None or task.uncancel() > 0:
                raise
        finally:
            ending = True
            listener.cancel()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def _as_one_chunk(response: dict) -> dict:
    """A whole chat completion as the one stream chunk that would have carried it."""
    choices = []
    for choice in response.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = dict(choice.get("message") or {})
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta.get("tool_calls") or ())]
        choices.append({"index": choice.get("index", 0), "delta": delta, "finish_reason": choice.get("finish_reason")})
    return {**{k: v for k, v in response.items() if k != "choices"}, "choices": choices}


def _refused(message: str) -> JSONResponse:
    """A 400 for a request the proxy will not forward (a bad session id, a path walking up)."""
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": 400}}, 400)


def _stream_media_type(dialect: Dialect, body: dict) -> str:
    """``text/event-stream``, but a JSON array for a Gemini stream asked without ``alt=sse``."""
    translator = dialect.stream(body)
    if isinstance(translator, google.StreamTranslator) and not translator.sse:
        return "application/json"
    return "text/event-stream"


async def read_bounded(upstream: Upstream, cap: int) -> bytes:
    """The whole (decoded) body, refused with :class:`UpstreamTooLarge` once it passes ``cap`` bytes
    (the pieces read so far are dropped, so a gzip bomb never sits in memory)."""
    parts: list[bytes] = []
    size = 0
    async for piece in upstream.aiter_bytes():
        size += len(piece)
        if size > cap:
            raise UpstreamTooLarge(_too_large_answer(cap))
        parts.append(piece)
    return b"".join(parts)


def _too_large_answer(cap: int) -> str:
    return (
        f"the engine's answer is over {cap:,} bytes (decompressed), the capture proxy's bound "
        "(capture --max-response-bytes); the call failed, nothing more was read"
    )


def is_context_overflow(status: int, parsed: Any) -> bool:
    """Whether an engine's 400 says the prompt plus the output does not fit its context window."""
    if status != 400:
        return False
    error = parsed.get("error") if isinstance(parsed, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    text = _error_message(parsed).lower()
    return code == "context_length_exceeded" or ("maximum context length" in text and "token" in text)


def budget_stop_response(model: str, completions: bool = False) -> dict[str, Any]:
    """The answer to a call over ``--call-budget``: a non-empty assistant message that stops (an
    empty one reads as a failed generation and is retried), worded about the budget, not the task."""
    if completions:
        choice: dict[str, Any] = {"index": 0, "text": BUDGET_STOP_MESSAGE, "finish_reason": "stop"}
    else:
        message = {"role": "assistant", "content": BUDGET_STOP_MESSAGE}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {
        "id": f"budget-{secrets.token_hex(6)}",
        "object": "text_completion" if completions else "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _chat_error_event(message: str) -> bytes:
    """A chat stream's error event (vLLM's shape) and its end."""
    error = {"error": {"message": message, "type": "upstream_error", "code": 502}}
    return b"data: " + orjson.dumps(error) + b"\n\ndata: [DONE]\n\n"


def _reasoning_for_engine(chat: dict) -> None:
    """Earlier reasoning in a translated request under both names engines read (in place):
    ``reasoning_content`` (SGLang, older vLLM templates) and ``reasoning`` (vLLM 0.32)."""
    for message in chat.get("messages") or ():
        if isinstance(message, dict) and message.get("reasoning_content") and "reasoning" not in message:
            message["reasoning"] = message["reasoning_content"]


def _error_message(parsed: Any) -> str:
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if parsed.get("message"):
            return str(parsed["message"])
    return str(parsed)[:2000]


class _CaptureStarlette(Starlette):
    """Starlette with model calls (POST) going straight to the handler.

    Every path goes to the one handler anyway, and :meth:`CaptureApp.recorded` answers every
    failure itself, so Starlette's middleware stack and router (about a tenth of the proxy's CPU
    per call) are skipped for POSTs; the lifespan and other methods still go through them.
    """

    handlers: CaptureApp | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """POSTs to the handler, the rest through Starlette."""
        if self.handlers is not None and scope["type"] == "http" and scope["method"] == "POST":
            scope["app"] = self
            response = await self.handlers.handle(Request(scope, receive, send))
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    config: CaptureConfig,
    writer: RecordWriter,
    default_session: str | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> Starlette:
    """The Starlette app; on shutdown, calls still open are recorded and the writer is closed."""
    session = default_session or (writer.path.stem if writer.path is not None else "capture")
    recorder = Recorder(writer, session, on_record=on_record)
    handlers = CaptureApp(config, recorder)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        handlers._client()  # made now, so the first call does not pay for it
        yield
        recorder.abandon_open("the proxy stopped before the call ended")
        await handlers.aclose()
        writer.close()

    install_log_filter()
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    app = _CaptureStarlette(routes=[Route("/{path:path}", handlers.handle, methods=methods)], lifespan=lifespan)
    app.handlers = handlers
    app.state.recorder = recorder
    app.state.writer = writer
    return app


class _Server(uvicorn.Server):
    """uvicorn without re-raising the signal after a graceful stop (so Ctrl-C exits 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        try:
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        except ValueError:  # not the main thread
            yield
            return
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def serve(
    config: CaptureConfig,
    host: str = "127.0.0.1",
    port: int = 8100,
    log_level: str = "warning",
    on_start: Callable[[Path], None] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    probe: bool = False,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
) -> RecordWriter:
    """Run the proxy until Ctrl-C / SIGTERM; returns the (closed) writer: its path and count.

    With ``probe``, the engine is probed first (rollout_graph.capture.probe): the report goes
    beside the capture file (``capture-<time>.probe.json``), its summary onto every record, and to
    ``on_probe``.
    """
    writer = RecordWriter.in_folder(config.out)
    if probe and writer.path is not None:
        from rollout_graph.capture.probe import PROBE_SUFFIX, probe_engine, summary, write_report

        report = probe_engine(config.upstream_base, config.model, timeout=min(config.timeout, 60.0))
        probe_path = writer.path.with_name(writer.path.name.removesuffix(".jsonl") + PROBE_SUFFIX)
        write_report(report, probe_path)
        config.engine = summary(report, probe_path.name)
        config.served_models = tuple(report.get("served_models") or ())
        if on_probe is not None:
            on_probe(report)
    if on_start is not None and writer.path is not None:
        on_start(writer.path)
    app = create_app(config, writer, on_record=on_record)
    server = _Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=int(max(1, config.drain_seconds)),
            # Harness SDKs keep idle connections ~5 s; outlive them so a call never meets a closing one.
            timeout_keep_alive=75,
            lifespan="on",
            access_log=False,
        )
    )
    try:
        asyncio.run(server.serve())
    finally:
        app.state.recorder.abandon_open("the proxy stopped before the call ended")
        writer.close()
    return writer
