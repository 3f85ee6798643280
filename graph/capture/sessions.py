"""Which rollout (session) a call belongs to, and what of a request never reaches a record.

Where it sits: the capture proxy (rollout_graph.capture.server) asks it on every call before the record
is made; the engine still gets every value as sent.

Entry points: sessions: :func:`split_session_path` (the ``/session/<id>/`` prefix, checked by
:func:`check_session_id`, a bad id raising :class:`BadSessionPath`), :func:`has_dot_segment`,
:func:`session_from_headers` (:data:`SESSION_HEADERS`, after the ``--session-header`` names). Secrets:
:func:`recordable_headers` (secret headers dropped), :func:`mask_secrets` (a body value whose key
:func:`is_secret_key` names becomes :data:`MASK`, outside conversation and schema), :func:`mask_query`.

The rules, with examples: docs/live.md, "What the proxy changes, and what it does not" (Sessions,
Never recorded); docs/limits.md, "The capture proxy" (Secrets).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

# (header, who sends it). Lower case; HTTP header names are case-insensitive.
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-session-id", "rollout-graph convention; opencode (subagents get their own)"),
    ("x-claude-code-session-id", "Claude Code (shared with its subagents)"),
    ("session-id", "codex"),
    ("thread-id", "codex"),
)

SESSION_PREFIX = "/session/"
MAX_SESSION_ID = 200
# What a session id in the URL may hold: letters, digits and a few marks that never change a path.
_SESSION_ID = re.compile(r"[A-Za-z0-9._:@+=~!$,;-]+")

# Header names never recorded: credentials and cookies, whatever their exact spelling.
_SECRET_PARTS = (
    "auth",
    "key",
    "token",
    "secret",
    "cookie",
    "password",
    "passwd",
    "signature",
    "credential",
    "jwt",
    "bearer",
    "private",
)
# Body keys and query parameters holding a secret: the documented rule.
SECRET_KEY = re.compile(
    r"(api[_-]?key|token|secret|password|passwd|credential|auth|access[_-]?code|private[_-]?key|bearer|jwt"
    r"|cookie|signature|(^|[_-])key$|^sig$|^code$)",
    re.IGNORECASE,
)
# Keys the rule would catch that hold counts or lists of token ids, never a credential.
NOT_SECRET_KEY = re.compile(r"(token_ids|_tokens|^tokens|^prompt_cache_key)$", re.IGNORECASE)
MASK = "[masked by rollout-graph]"
# Request parts that are conversation or JSON schema, never credentials: kept as sent.
_NOT_SECRET_TREES = frozenset(
    {
        "messages",
        "input",
        "tools",
        "functions",
        "response_format",
        "system",
        "prompt",
        "instructions",
        "text",
        "tool_choice",
        # Gemini: the conversation, the system prompt, the output schema, the tool settings.
        "contents",
        "systemInstruction",
        "system_instruction",
        "generationConfig",
        "generation_config",
        "toolConfig",
        "tool_config",
    }
)


class BadSessionPath(ValueError):
    """A ``/session/<id>/`` path whose id may not be used (the message says why)."""


def check_session_id(session: str) -> str:
    """``session`` when it is a usable session id in a URL, else :class:`BadSessionPath`."""
    if not session:
        raise BadSessionPath("the session id in /session/<id>/ is empty")
    if len(session) > MAX_SESSION_ID:
        raise BadSessionPath(f"the session id in /session/<id>/ is over {MAX_SESSION_ID} characters")
    if "/" in session or "\\" in session:
        raise BadSessionPath(
            f"the session id {session[:80]!r} holds a '/' or '\\' (also as %2F or %5C): a session id in "
            "the URL is one path segment; name the rollout with letters, digits and . _ - : @ + = ~ "
            "(or send it in an X-Session-Id header)"
        )
    if session in (".", "..") or _SESSION_ID.fullmatch(session) is None:
        raise BadSessionPath(
            f"the session id {session[:80]!r} holds characters a session id may not: use letters, digits "
            "and . _ - : @ + = ~ (or send it in an X-Session-Id header)"
        )
    return session


def split_session_path(path: str, raw_path: bytes | None = None) -> tuple[str | None, str]:
    """``/session/abc/v1/chat/completions`` -> ``("abc", "/v1/chat/completions")``.

    ``raw_path`` is the path as it came (percent-encoded): a ``%2F`` in the id is seen there.
    Raises :class:`BadSessionPath` for an id :func:`check_session_id` refuses.
    """
    if not path.startswith(SESSION_PREFIX):
        return None, path
    raw = raw_path.decode("latin-1") if raw_path is not None else quote(path, safe="/")
    if raw.startswith(SESSION_PREFIX):
        segment, sep, _ = raw[len(SESSION_PREFIX) :].partition("/")
        session = unquote(segment)
    else:  # the raw path does not say (a test client): the decoded one does
        session, sep, _ = path[len(SESSION_PREFIX) :].partition("/")
    check_session_id(session)
    rest = path[len(SESSION_PREFIX) + len(session) :] if path[len(SESSION_PREFIX) :].startswith(session) else None
    if rest is None:  # the decoded path cut differently from the raw one: a %2F was decoded
        raise BadSessionPath(f"the session id {session[:80]!r} holds a '/' (as %2F)")
    return session, rest or "/"


def has_dot_segment(path: str) -> bool:
    """Whether a (decoded) path walks up with a ``..`` segment (never forwarded to the engine)."""
    return any(part == ".." for part in path.replace("\\", "/").split("/"))


def session_from_headers(headers: Mapping[str, str], extra: Iterable[str] = ()) -> str | None:
    """The first non-empty session header: ``extra`` names first, then :data:`SESSION_HEADERS`."""
    for name in (*extra, *(h for h, _ in SESSION_HEADERS)):
        value = headers.get(name.lower())
        if value and value.strip():
            return value.strip()[:MAX_SESSION_ID]
    return None


def is_secret_header(name: str) -> bool:
    """True for headers that may carry credentials (Authorization, x-api-key, X-Session-Jwt, cookies, ...)."""
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_PARTS) or SECRET_KEY.search(lowered) is not None


def is_secret_key(key: str) -> bool:
    """True for a body key or query parameter whose value is a secret (:data:`SECRET_KEY`)."""
    return SECRET_KEY.search(key) is not None and NOT_SECRET_KEY.search(key) is None


def _masked_pair(item: Any) -> Any:
    """A ``[name, value]`` header pair or ``{"name": ..., "value": ...}`` entry with a secret
    header's value masked; ``item`` itself when it is neither or names no secret."""
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str) and item[1]:
        if is_secret_header(item[0]) and item[1] != MASK:
            return [item[0], MASK]
    elif isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
        if is_secret_header(item["name"]) and item["value"] not in (MASK, None, ""):
            return {**item, "value": MASK}
    return item


def mask_secrets(value: Any, depth: int = 0) -> Any:
    """A copy of a request body with every secret value replaced by :data:`MASK` (the rule above).

    Only what changes is copied; the caller's body (sent upstream) is never modified.
    """
    if depth > 64:  # deeper than any request; left as it is rather than recursing further
        return value
    if isinstance(value, dict):
        out: dict | None = None
        for key, item in value.items():
            if isinstance(key, str) and key in _NOT_SECRET_TREES:
                continue
            if isinstance(key, str) and is_secret_key(key) and isinstance(item, str | dict | list) and item:
                new: Any = MASK
            else:
                new = mask_secrets(item, depth + 1)
            if new is not item:
                out = dict(value) if out is None else out
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [mask_secrets(_masked_pair(item), depth + 1) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def mask_query(query: str) -> str:
    """A query string with the value of every secret parameter (``key``, ``api_key``, ``token``,
    ``access_token``, ``sig``, ...) replaced by :data:`MASK`; every other part kept as sent."""
    parts = query.split("&")
    out = []
    for part in parts:
        name, sep, value = part.partition("=")
        if value and is_secret_key(unquote(name.replace("+", " "))):
            part = f"{name}{sep}{quote(MASK, safe='[]')}"
        out.append(part)
    return "&".join(out)


def readable_header(value: str) -> str:
    """A header value as text: HTTP servers decode bytes as latin-1; UTF-8 bytes are read back as UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def recordable_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers a record keeps: everything but credentials and transport details."""
    skip = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
    return {
        k.lower(): readable_header(v) for k, v in headers.items() if k.lower() not in skip and not is_secret_header(k)
    }
