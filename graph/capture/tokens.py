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


MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens")
# What --pin-sampling may set: the keys that change the distribution tokens are sampled from.
PINNABLE = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")


def cap_max_tokens(body: dict, cap: int | None) -> dict:
    """Clamp the output length to ``cap`` (in place): larger ``max_tokens`` /
    ``max_completion_tokens`` are lowered to it, and a request that sets neither gets
    ``max_tokens: cap`` (the output clamp, docs/live.md).

    Claude Code asks for 32,000 tokens; an engine with a small context refuses such a request.
    The record keeps both values, so the loader reports the change (``sampling_neutralised``).
    """
    if cap is None:
        return body
    for key in MAX_TOKENS_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > cap:
            body[key] = cap
    if all(body.get(key) is None for key in MAX_TOKENS_KEYS):
        body["max_tokens"] = cap
    return body


def pin_sampling(body: dict, pins: dict[str, float] | None) -> dict:
    """Set every pinned sampling key (``--pin-sampling temperature=1,top_p=1``) in place,
    whatever the harness asked; the record keeps the harness's values in ``request``."""
    if pins:
        body.update(pins)
    return body


def parse_pins(text: str) -> dict[str, float]:
    """``temperature=1,top_p=1`` -> ``{"temperature": 1.0, "top_p": 1.0}`` (``top_k`` an int).

    Raises ValueError naming the part it cannot read.
    """
    pins: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in PINNABLE:
            raise ValueError(f"{part!r}: expected KEY=VALUE with KEY one of {', '.join(PINNABLE)}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value.strip()!r} is not a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{part!r}: not a finite number")
        pins[key] = int(number) if key == "top_k" and number == int(number) else number
    if not pins:
        raise ValueError("no KEY=VALUE given")
    return pins


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
