"""Images and other inline media in a recorded body: never their bytes, a placeholder instead.

A harness sends an image as base64 in every dialect: a ``data:`` URL (chat ``image_url.url``,
Responses ``input_image.image_url``, chat ``file.file_data``), an Anthropic ``source`` of type
``base64`` (``data`` beside ``media_type``), or a Gemini ``inlineData`` (``data`` beside
``mimeType``). The engine gets them as sent (translated to ``image_url`` parts); the record keeps
:func:`placeholder` text in their place: the media type, the size in bytes and the SHA-256 of
the decoded bytes, so the same image reads the same in every call (message linking still matches
it) and a reader can check it against a file without the record holding it. The record's
``media`` list names each one (where, type, bytes, sha256). docs/formats.md, "Capture records".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

PREFIX = "[media omitted by rollout-graph:"
_MIME_KEYS = ("media_type", "mimeType", "mime_type")
_BASE64_HINT = (b";base64,", b'"data"')  # a body holding neither has no inline media (no walk)


def might_hold_media(raw: bytes) -> bool:
    """A cheap test on the raw body: False means no inline media, so :func:`omit_media` is skipped."""
    return any(hint in raw for hint in _BASE64_HINT)


def placeholder(mime: str, data: str) -> tuple[str, dict[str, Any]]:
    """The text that stands for base64 ``data`` of type ``mime``, and its description."""
    try:
        decoded = base64.b64decode(data, validate=False)
        size, digest = len(decoded), hashlib.sha256(decoded).hexdigest()
        note = ""
    except (ValueError, binascii.Error):
        size, digest = len(data), hashlib.sha256(data.encode("utf-8", "replace")).hexdigest()
        note = ", not base64: the text's size and hash"
    mime = mime[:100]
    text = f"{PREFIX} {mime}, {size} bytes, sha256 {digest}{note}]"
    return text, {"mime": mime, "bytes": size, "sha256": digest}


def _data_url(value: str) -> tuple[str, str] | None:
    if not value.startswith("data:"):
        return None
    head, sep, data = value.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[5:-7] or "application/octet-stream", data


def omit_media(value: Any, where: str = "", found: list[dict[str, Any]] | None = None, depth: int = 0) -> Any:
    """A copy of ``value`` with every inline base64 payload replaced by its placeholder; ``found``
    gets one description per payload (with ``where``: its path in the body). Only what changes is
    copied: the caller's body (sent upstream) is never modified."""
    if found is None:
        found = []
    if depth > 64:
        return value
    if isinstance(value, str):
        parsed = _data_url(value) if len(value) > 5 else None
        if parsed is None:
            return value
        text, info = placeholder(*parsed)
        found.append({"where": where, **info})
        return text
    if isinstance(value, dict):
        out: dict | None = None
        mime = next((value[k] for k in _MIME_KEYS if isinstance(value.get(k), str)), None)
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key == "data" and mime is not None and isinstance(item, str) and item and not item.startswith(PREFIX):
                if item.startswith("data:"):
                    new: Any = omit_media(item, path, found, depth + 1)
                else:
                    new, info = placeholder(mime, item)
                    found.append({"where": path, **info})
            else:
                new = omit_media(item, path, found, depth + 1)
            if new is not item:
                out = dict(value) if out is None else out
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [omit_media(item, f"{where}[{i}]", found, depth + 1) for i, item in enumerate(value)]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
