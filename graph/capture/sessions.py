"""Which rollout (session) a call belongs to, and which headers never reach a record.

Order: the ``/session/<id>/`` path prefix (what the user typed in the base URL), then the
headers in :data:`SESSION_HEADERS` in order, then the proxy run's default session. The list is
extensible with ``capture --session-header NAME`` (checked before the built-in ones).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# (header, who sends it). Lower case; HTTP header names are case-insensitive.
SESSION_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-session-id", "rollout-graph convention; opencode (subagents get their own)"),
    ("x-claude-code-session-id", "Claude Code (shared with its subagents)"),
    ("session-id", "codex"),
    ("thread-id", "codex"),
)

_PREFIX = re.compile(r"^/session/([^/]+)(/.*)?$")

# Header names never recorded: credentials and cookies, whatever their exact spelling.
_SECRET_PARTS = ("auth", "key", "token", "secret", "cookie", "password", "signature")


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
    """True for headers that may carry credentials (Authorization, x-api-key, cookies, ...)."""
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_PARTS)


def recordable_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers a record keeps: everything but credentials and transport details."""
    skip = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
    return {k.lower(): v for k, v in headers.items() if k.lower() not in skip and not is_secret_header(k)}
