"""What token capture adds to a request, and removes again from what the harness gets back.

A field is added only when the harness left it out (or set it to false/null); exactly the added
fields are stripped from the response, streamed or not, so the harness behaves as it would
without the proxy. See docs/formats.md ("Capture records").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True, slots=True)
class Added:
    """Which capture fields the proxy added to one request."""

    token_ids: bool = False  # return_token_ids
    logprobs: bool = False  # chat: logprobs; completions: logprobs
    top_logprobs: bool = False  # chat only: top_logprobs added while the harness asked for logprobs

    @property
    def anything(self) -> bool:
        """True when the response needs stripping at all."""
        return self.token_ids or self.logprobs or self.top_logprobs


def _absent(body: dict, key: str) -> bool:
    return body.get(key) in (None, False)


def add_capture_fields(body: dict, path: str, top_logprobs: int) -> tuple[dict, Added]:
    """A copy of ``body`` with token ids and logprobs switched on, and what was added."""
    submitted = dict(body)
    token_ids = _absent(body, "return_token_ids")
    if token_ids:
        submitted["return_token_ids"] = True
    if path == COMPLETIONS_PATH:
        logprobs = _absent(body, "logprobs")
        if logprobs:
            submitted["logprobs"] = top_logprobs
        return submitted, Added(token_ids=token_ids, logprobs=logprobs)
    logprobs = _absent(body, "logprobs")
    if logprobs:
        submitted["logprobs"] = True
    top = body.get("top_logprobs") is None and top_logprobs > 0
    if top:
        submitted["top_logprobs"] = top_logprobs
    # When the harness asked for logprobs itself, the added alternatives are emptied, not removed.
    return submitted, Added(token_ids=token_ids, logprobs=logprobs, top_logprobs=top and not logprobs)


def strip_body(body: Any, added: Added) -> Any:
    """Remove what :func:`add_capture_fields` added from a response body or stream chunk (in place)."""
    if not isinstance(body, dict) or not added.anything:
        return body
    if added.token_ids:
        body.pop("prompt_token_ids", None)
    for choice in body.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if added.token_ids:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        if added.logprobs and "logprobs" in choice:
            choice["logprobs"] = None
        elif added.top_logprobs and isinstance(choice.get("logprobs"), dict):
            for entry in choice["logprobs"].get("content") or ():
                if isinstance(entry, dict) and "top_logprobs" in entry:
                    entry["top_logprobs"] = []
    return body


def cap_max_tokens(body: dict, cap: int | None) -> dict:
    """Lower ``max_tokens`` / ``max_completion_tokens`` to ``cap`` (in place) when they exceed it.

    Claude Code asks for 32,000 tokens; an engine with a small context refuses such a request.
    The record keeps both values, so the loader reports the change (``sampling_neutralised``).
    """
    if cap is None:
        return body
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > cap:
            body[key] = cap
    return body


def stripped_copy(body: Any, added: Added) -> Any:
    """What :func:`strip_body` gives, on a copy of only the parts it changes (``body`` is kept)."""
    if not isinstance(body, dict) or not added.anything:
        return body
    copy = dict(body)
    choices = body.get("choices")
    if isinstance(choices, list):
        copy["choices"] = [dict(c) if isinstance(c, dict) else c for c in choices]
        if added.top_logprobs and not added.logprobs:
            for choice in copy["choices"]:
                logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
                if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                    choice["logprobs"] = {
                        **logprobs,
                        "content": [dict(e) if isinstance(e, dict) else e for e in logprobs["content"]],
                    }
    return strip_body(copy, added)
