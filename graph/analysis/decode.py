"""Token ids -> text a person can read, offline by default.

Where the tokenizer comes from, in order: a path the user gives (file or folder) -> a
``tokenizer.json`` next to the trace or in ``sample_traces/`` whose folder or configured name
matches the trace's model -> the local Hugging Face cache -> a Hub download, only when the user
asks -> token text carried by the trace itself (logprob ``token`` strings, top-k entries) -> raw
ids. Every decoder says which source it used.

Per-token text: byte-level pieces that split a multi-byte character are joined, the character
appearing once, on the token that completes it (the earlier pieces are empty strings), so no
mojibake is shown; special tokens keep their text.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.resources import SAMPLES

TOKENIZER_FILE = "tokenizer.json"

USER = "user path"
BESIDE_TRACE = "next to the trace"
BUNDLED = "bundled sample_traces"
HF_CACHE = "local Hugging Face cache"
HUB = "Hugging Face Hub download"
TRACE_TEXT = "token text in the trace"
RAW_IDS = "raw ids"


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE maps every byte to a printable character; this is its inverse."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass
class TokenizerDecoder:
    """Decodes with a ``tokenizer.json``: each id's bytes, then an incremental UTF-8 decoder."""

    path: Path
    source: str
    _bytes: list[bytes] = field(default_factory=list, repr=False)
    _special: set[int] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        spec = json.loads(self.path.read_text(encoding="utf-8"))
        model = spec.get("model", {})
        vocab: dict[str, int] = model.get("vocab", {})
        added = {t["id"]: t["content"] for t in spec.get("added_tokens", [])}
        byte_level = _uses_byte_level(spec)
        table = _byte_decoder()
        size = max([*vocab.values(), *added.keys(), -1]) + 1
        self._bytes = [b""] * size
        for token, i in vocab.items():
            self._bytes[i] = _token_bytes(token, table) if byte_level else _piece_bytes(token)
        for i, content in added.items():
            self._bytes[i] = content.encode()
        self._special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}

    @property
    def label(self) -> str:
        """Where the tokenizer was found, for display."""
        return f"{_short_path(self.path)} ({self.source})"

    def is_special(self, token_id: int) -> bool:
        """Whether the id is a special token (e.g. an end-of-turn marker) of this tokenizer."""
        return token_id in self._special

    def pieces(self, ids: np.ndarray | list[int]) -> list[str]:
        """One string per id; ``"".join(pieces)`` is the decoded text."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        table, size = self._bytes, len(self._bytes)
        out = [decoder.decode(table[i] if 0 <= i < size else f"<{i}>".encode()) for i in np.asarray(ids).tolist()]
        tail = decoder.decode(b"", final=True)
        if tail and out:
            out[-1] += tail
        return out

    def text(self, ids) -> str:
        """Decoded text of the ids, joined."""
        return "".join(self.pieces(ids))


def _short_path(path: Path) -> str:
    """Relative to the working directory, else only its last two parts (no server paths shown)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return f"…/{path.parent.name}/{path.name}"


def _uses_byte_level(spec: dict) -> bool:
    decoder = spec.get("decoder") or {}
    kinds = {decoder.get("type")} | {d.get("type") for d in decoder.get("decoders", []) or []}
    return "ByteLevel" in kinds


def _token_bytes(token: str, table: dict[str, int]) -> bytes:
    try:
        return bytes(table[c] for c in token)
    except KeyError:
        return token.encode()


def _piece_bytes(token: str) -> bytes:
    """SentencePiece-style vocabularies: ``▁`` is a space and ``<0xNN>`` a raw byte."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return bytes([int(token[3:5], 16)])
        except ValueError:
            pass
    return token.replace("▁", " ").encode()


# TraceTextDecoder.pieces: runs of at least TABLE_MIN_RUN ids, each below TABLE_IDS (a vocabulary's
# size), are looked up in a table of pieces (at most TABLE_IDS strings, about 15 MB), grown
# TABLE_STEP ids at a time
TABLE_IDS = 1 << 18
TABLE_MIN_RUN = 16
TABLE_STEP = 1 << 12


class TraceTextDecoder:
    """No tokenizer: the token strings the trace carried for sampled tokens, else ``<id>``.

    :meth:`from_calls` collects those strings only when first used (a summary never decodes, and
    collecting them reads every call's top-k alternatives, which a loader may have left in the file).
    """

    __slots__ = ("_known", "_source", "_calls", "_table")

    def __init__(self, known: dict[int, str], source: str = TRACE_TEXT) -> None:
        self._known: dict[int, str] | None = known
        self._source: str | None = source
        self._calls: list[Call] | None = None
        self._table: tuple[np.ndarray, np.ndarray] | None = None  # pieces by id and their lengths (_table_for)

    @classmethod
    def from_calls(cls, calls: list[Call]) -> TraceTextDecoder:
        """The texts carried by ``calls`` (:func:`trace_token_texts`), collected when first used;
        the source is ``TRACE_TEXT`` when there are any, else ``RAW_IDS``."""
        decoder = cls({})
        decoder._known, decoder._source, decoder._calls = None, None, list(calls)
        return decoder

    @property
    def known(self) -> dict[int, str]:
        """Token id -> the text the trace carried for it."""
        if self._known is None:
            self._known = trace_token_texts(self._calls or [])
            self._calls = None
        return self._known

    @property
    def source(self) -> str:
        """``TRACE_TEXT`` or ``RAW_IDS``."""
        if self._source is None:
            self._source = TRACE_TEXT if self.known else RAW_IDS
        return self._source

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceTextDecoder):
            return NotImplemented
        return (self.known, self.source) == (other.known, other.source)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._known is None:
            return "TraceTextDecoder(texts not collected yet)"
        return f"TraceTextDecoder({len(self._known)} texts, source={self.source!r})"

    @property
    def label(self) -> str:
        """What the fallback decoder shows, for display."""
        return f"{len(self.known)} token texts carried by the trace" if self.known else "raw ids (no tokenizer found)"

    def is_special(self, token_id: int) -> bool:
        """Always False: without a tokenizer no id is known to be special."""
        return False

    def pieces(self, ids) -> list[str]:
        """Per-id text carried by the trace, or ``<id>`` where the trace carried none (a run of ids
        the table covers is looked up in it: the same strings, :meth:`_table_for`)."""
        arr = np.asarray(ids)
        table = self._table_for(arr)
        if table is not None:
            return table[0].take(arr).tolist()
        known = self.known
        return [known.get(i, f"<{i}>") for i in arr.tolist()]

    def joined_pieces(self, ids) -> tuple[str, np.ndarray]:
        """``"".join(self.pieces(ids))`` and each piece's length (int64): what the search index
        keeps of a span, by the table where :meth:`pieces` uses it."""
        arr = np.asarray(ids)
        table = self._table_for(arr)
        if table is None:
            pieces = self.pieces(arr)
            return "".join(pieces), np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        return "".join(table[0].take(arr).tolist()), table[1].take(arr)

    def _table_for(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Every id's piece and its length, for ids 0 up to at least ``arr``'s largest, when ``arr``
        is a run of at least TABLE_MIN_RUN integer ids from 0 to below TABLE_IDS (else None). Made
        once, grown by the ids not covered yet when a larger id comes: at most TABLE_IDS pieces."""
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.shape[0] < TABLE_MIN_RUN:
            return None
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= TABLE_IDS:
            return None
        table = self._table
        if table is None or table[0].shape[0] <= high:
            known = self.known
            old = 0 if table is None else table[0].shape[0]
            size = min(TABLE_IDS, -(-(high + 1) // TABLE_STEP) * TABLE_STEP)
            added = [known.get(i, f"<{i}>") for i in range(old, size)]
            texts, lengths = np.empty(size, dtype=object), np.empty(size, dtype=np.int64)
            if table is not None:
                texts[:old], lengths[:old] = table
            texts[old:] = added
            lengths[old:] = np.fromiter(map(len, added), dtype=np.int64, count=len(added))
            table = self._table = (texts, lengths)
        return table

    def text(self, ids) -> str:
        """Fallback text of the ids, joined."""
        return "".join(self.pieces(ids))


Decoder = TokenizerDecoder | TraceTextDecoder


@lru_cache(maxsize=16)
def load_tokenizer(path: Path, source: str) -> TokenizerDecoder:
    """A decoder from the tokenizer file at ``path``; ``source`` says how it was found."""
    return TokenizerDecoder(path, source)


def _tokenizer_in(folder: Path) -> Path | None:
    candidate = folder / TOKENIZER_FILE
    return candidate if candidate.is_file() else None


def _model_names(model: str | None) -> set[str]:
    if not model:
        return set()
    base = model.rstrip("/").rsplit("/", 1)[-1]
    return {model.lower(), base.lower()}


def _matching_folder(root: Path, model: str | None) -> Path | None:
    """A folder under ``root`` holding a tokenizer whose folder name or configured name is the model's."""
    names = _model_names(model)
    if not names or not root.is_dir():
        return None
    for tok in sorted(root.rglob(TOKENIZER_FILE)):
        folder = tok.parent
        configured = _configured_name(folder)
        if folder.name.lower() in names or (configured and configured.lower() in names):
            return tok
    return None


def _configured_name(folder: Path) -> str | None:
    config = folder / "tokenizer_config.json"
    if not config.is_file():
        return None
    try:
        return json.loads(config.read_text()).get("name_or_path")
    except ValueError:
        return None


def _hf_cache_tokenizer(model: str | None) -> Path | None:
    if not model or "/" not in model:
        return None
    home = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    snapshots = home / f"models--{model.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob(f"*/{TOKENIZER_FILE}")) if snapshots.is_dir() else []
    return found[-1] if found else None


def _hub_tokenizer(model: str) -> Path | None:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return None
    try:
        return Path(hf_hub_download(model, TOKENIZER_FILE))
    except Exception:  # noqa: BLE001 - any Hub failure means "not available"; the caller falls back
        return None


def find_tokenizer(
    model: str | None,
    trace_paths: Sequence[Path] = (),
    user_path: Path | None = None,
    allow_download: bool = False,
    samples: Path = SAMPLES,
) -> TokenizerDecoder | None:
    """A tokenizer for ``model``: the user's path, else beside the traces, bundled, HF cache, or a download if allowed."""
    if user_path is not None:
        path = user_path if user_path.is_file() else _tokenizer_in(user_path)
        if path is None:
            raise FileNotFoundError(f"no {TOKENIZER_FILE} at {user_path}")
        return load_tokenizer(path.resolve(), USER)
    for trace in trace_paths:
        folder = trace if trace.is_dir() else trace.parent
        path = _tokenizer_in(folder) or _matching_folder(folder, model)
        if path is not None:
            return load_tokenizer(path.resolve(), BESIDE_TRACE)
    path = _matching_folder(samples, model)
    if path is not None:
        return load_tokenizer(path.resolve(), BUNDLED)
    path = _hf_cache_tokenizer(model)
    if path is not None:
        return load_tokenizer(path.resolve(), HF_CACHE)
    if allow_download and model:
        path = _hub_tokenizer(model)
        if path is not None:
            return load_tokenizer(path.resolve(), HUB)
    return None


def trace_token_texts(calls: list[Call]) -> dict[int, str]:
    """id -> text from what the trace itself carried (sampled tokens and top-k alternatives)."""
    known: dict[int, str] = {}
    for call in calls:
        if call.token_texts:
            # strict=False: sampled_ids stays empty when the recorded ids were unreadable (the texts still load)
            for token_id, text in zip(call.sampled_ids.tolist(), call.token_texts, strict=False):
                if text:
                    known.setdefault(token_id, text)
        top = call.top_k
        if top is not None and top.texts is not None:
            for token_id, text in zip(top.ids.ravel().tolist(), top.texts, strict=True):
                if token_id >= 0 and text:
                    known.setdefault(token_id, text)
    return known


def decoder_for(
    calls: list[Call],
    trace_paths: Sequence[Path] = (),
    user_path: Path | None = None,
    allow_download: bool = False,
    samples: Path = SAMPLES,
) -> Decoder:
    """The best decoder available for a rollout, by the resolution order above."""
    model = next((c.model for c in calls if c.model), None)
    found = find_tokenizer(model, list(trace_paths), user_path, allow_download, samples)
    if found is not None:
        return found
    return TraceTextDecoder.from_calls(calls)
