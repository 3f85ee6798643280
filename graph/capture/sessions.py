"""Which rollout (session) a call belongs to, and which headers and body fields never reach a record.

Secrets (docs/capture.md, "What is never recorded"): a header or body key is a secret when its
name matches :data:`SECRET_KEY` (``api_key``, ``X-Access-Code``, ``metadata.token``, ...). Secret
headers are dropped from a record; secret body values (strings, or whole objects and lists) are
replaced by :data:`MASK` in the recorded ``request`` and ``submitted_request``, outside the parts
that are conversation or schema (``messages``, ``input``, ``tools``, ``functions``,
``response_format``, ``system``). Counts and switches (``max_tokens: 512``, ``return_token_ids:
true``) are numbers and booleans, so they are never masked. The upstream still gets every value.

Order: the ``/session/<id>/`` path prefix (what the user typed in the base URL), then the
headers in :data:`SESSION_HEADERS` in order, then the proxy run's default session. The list is
extensible with ``capture --session-header NAME`` (checked before the built-in ones).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# (header, who sends it). Lower case; HTTP header names are case-insensitive.
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-session-id", "rollout-graph convention; opencode (subagents get their own)"),
    ("x-claude-code-session-id", "Claude Code (shared with its subagents)"),
    ("session-id", "codex"),
    ("thread-id", "codex"),
)

_PREFIX = re.compile(r"^/session/([^/]+)(/.*)?$")

# Header names never recorded: credentials and cookies, whatever their exact spelling.
_SECRET_PARTS = ("auth", "key", "token", "secret", "cookie", "password", "signature", "credential", "passwd")
# Body keys (and header names) holding a secret: the documented rule.
SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|credential|auth|access[_-]?code)", re.IGNORECASE)
MASK = "[masked by rollout-graph]"
# Request parts that are conversation or JSON schema, never credentials: kept as sent.
_NOT_SECRET_TREES = frozenset({"messages", "input", "tools", "functions", "response_format", "system", "prompt"})


def split_session_path(path: str) -> tuple[str | None, str]:
    """``/session/abc/v1/chat/completions`` -> ``("abc", "/v1/chat/completions")``."""
    match = _PREFIX.match(path)
    if match is None:
        return None, path
    return match.group(1), match.group(2) or "/"


def session_from_headers(headers: Mapping[str, str], extra: Iterable[str] = ()) -> str | None:
    """The first non-empty session header: ``extra`` names first, then :data:`SESSION_HEADERS`."""
    for name in (*extra, *(h for h, _ in SESSION_HEADERS)):
        value = headers.get(name.lower())
        if value and value.strip():
            return value.strip()
    return None


def is_secret_header(name: str) -> bool:
    """True for headers that may carry credentials (Authorization, x-api-key, X-Access-Code, cookies, ...)."""
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_PARTS) or SECRET_KEY.search(lowered) is not None


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
            if isinstance(key, str) and SECRET_KEY.search(key) and isinstance(item, str | dict | list) and item:
                new: Any = MASK
            else:
                new = mask_secrets(item, depth + 1)
            if new is not item:
                out = dict(value) if out is None else out
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [mask_secrets(item, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


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
