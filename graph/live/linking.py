"""Incremental linking: each new call finds its parent among the calls already there, and late
parents adopt the calls they are closer to (SPEC 3.1-3.3, docs/semantics.md).

The result equals batch linking (:func:`rollout_graph.core.linking.link`) of the same calls in their
*order key* order, whatever order they arrive in: a call's token parent is the call, among all,
whose end ids are the longest prefix of its prompt (ties to the smallest key), so each arrival
only has to (1) find the best parent among the calls present and (2) take over the children for
which it is better than their current parent. Message fallback looks only at calls with a smaller
key, so a late arrival with a small key can adopt message children too. The key is the batch
arrival position: the arrival counter by default, ``(path, line)`` order when following several
files.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollout_graph.core.linking import MESSAGES, TOKENS, Links, end_is_prefix, prefix_hashes
from rollout_graph.core.messages import Turn, canonical, strip_leading_system
from rollout_graph.core.records import Call
from rollout_graph.core.types import LinkedBy


@dataclass(frozen=True, slots=True)
class Relink:
    """Call ``node`` (internal arrival id) now has parent ``parent``, linked ``via``; it had
    ``previous`` (None for a new call or a former root)."""

    node: int
    parent: int | None
    via: LinkedBy | None
    previous: int | None
    new: bool


class _Column:
    """A growable int64 numpy column (amortised O(1) append, O(1) update)."""

    def __init__(self) -> None:
        self.data = np.zeros(64, dtype=np.int64)
        self.size = 0

    def append(self, value: int) -> None:
        if self.size == self.data.shape[0]:
            self.data = np.concatenate([self.data, np.zeros(self.size, dtype=np.int64)])
        self.data[self.size] = value
        self.size += 1

    def view(self) -> np.ndarray:
        return self.data[: self.size]


def _end_hash(prompt: np.ndarray, prompt_hashes: np.ndarray, call: Call) -> int:
    """Hash of ``prompt + sampled`` from the prompt's prefix hashes (same polynomial as batch)."""
    if call.n_sampled == 0:
        return int(prompt_hashes[-1])
    end = np.concatenate([prompt.astype(np.int64), call.sampled_ids.astype(np.int64)])
    return int(prefix_hashes(end)[-1])


class IncrementalLinker:
    """Parents of a growing set of calls, equal at every moment to batch linking of the calls
    present, taken in key order. Internal ids are arrival positions (``calls[i]``)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.keys: list[Any] = []
        self.parents: list[int | None] = []
        self.linked_by: list[LinkedBy | None] = []
        self._order: list[int] = []  # internal ids sorted by key
        # token index: (end length, end hash) -> internal ids sorted by key
        self._ends: dict[tuple[int, int], list[int]] = {}
        self._lengths: list[int] = []  # distinct end lengths, ascending
        self._n_prompt = _Column()  # -1: no prompt ids
        self._parent_end = _Column()  # end length of the current token parent, -1: none
        # message index, built when the first call needing it arrives
        self._messages_on = False
        self._turns: dict[tuple, list[int]] = {}  # stripped end turns -> internal ids
        self._end_len: dict[int, int] = {}  # internal id -> full end length (message candidates)
        self._needing: dict[int, tuple[list[Turn], int]] = {}  # stripped request turns, full length
        self._best: dict[int, tuple[int, int]] = {}  # message parent of a needing call: (end length, id)

    def __len__(self) -> int:
        return len(self.calls)

    # -- public -----------------------------------------------------------------------------------

    def add(self, call: Call, key: Any = None) -> list[Relink]:
        """Link ``call`` (its key: the arrival counter by default); returns every parent it set:
        its own first, then the calls it adopted."""
        i = len(self.calls)
        key = i if key is None else key
        self.calls.append(call)
        self.keys.append(key)
        self.parents.append(None)
        self.linked_by.append(None)
        bisect.insort(self._order, i, key=self.keys.__getitem__)
        changes: list[Relink] = []
        self._n_prompt.append(-1 if call.prompt_ids is None else call.n_prompt)
        self._parent_end.append(-1)
        if call.prompt_ids is not None:
            prompt = call.prompt_ids
            hashes = prefix_hashes(prompt)
            parent = self._token_parent(call, prompt, hashes)
            if parent is not None:
                self._set(i, parent, TOKENS)
            changes.append(Relink(i, parent, self.linked_by[i], None, True))
            if call.n_end > 0:
                changes += self._token_adopt(i, call, key, prompt, hashes)
        else:
            changes.append(Relink(i, None, None, None, True))
        if call.prompt_ids is None and call.request_messages is not None and not self._messages_on:
            self._messages_on = True
            for j in self._order:  # index everything already there, in key order
                if j != i:
                    self._index_messages(j)
        if self._messages_on:
            changes += self._index_messages(i)
        first = changes[0]
        if self.parents[i] != first.parent:  # linked by messages while indexing
            changes[0] = Relink(i, self.parents[i], self.linked_by[i], None, True)
        return changes

    def order(self) -> list[int]:
        """Internal ids in key order (batch arrival order)."""
        return list(self._order)

    def links(self) -> tuple[list[Call], Links]:
        """The calls in key order and their links, indexed like that list: what
        :func:`rollout_graph.core.linking.link` returns for it."""
        position = {node: p for p, node in enumerate(self._order)}
        parents: list[int | None] = []
        via: list[LinkedBy | None] = []
        for node in self._order:
            parent = self.parents[node]
            parents.append(None if parent is None else position[parent])
            via.append(self.linked_by[node])
        return [self.calls[n] for n in self._order], Links(parents, via)

    # -- tokens -----------------------------------------------------------------------------------

    def _set(self, node: int, parent: int | None, via: LinkedBy | None) -> None:
        self.parents[node] = parent
        self.linked_by[node] = via
        self._parent_end.data[node] = -1 if parent is None or via != TOKENS else self.calls[parent].n_end

    def _token_parent(self, call: Call, prompt: np.ndarray, hashes: np.ndarray) -> int | None:
        size = call.n_prompt
        if size == 0:
            return None
        upto = bisect.bisect_right(self._lengths, size)
        for length in reversed(self._lengths[:upto]):
            for j in self._ends.get((length, int(hashes[length])), ()):
                candidate = self.calls[j]
                if candidate.n_prompt < size and end_is_prefix(candidate, prompt):
                    return j
        return None

    def _token_adopt(self, i: int, call: Call, key: Any, prompt: np.ndarray, hashes: np.ndarray) -> list[Relink]:
        end_len = call.n_end
        bucket = self._ends.setdefault((end_len, _end_hash(prompt, hashes, call)), [])
        bisect.insort(bucket, i, key=self.keys.__getitem__)
        at = bisect.bisect_left(self._lengths, end_len)
        if at == len(self._lengths) or self._lengths[at] != end_len:
            self._lengths.insert(at, end_len)
        n_prompt = self._n_prompt.view()
        parent_end = self._parent_end.view()
        # Could this call be a better parent? Longer prompt than ours, room for our end, and a
        # current parent no longer than our end (a tie is settled by key below).
        maybe = np.flatnonzero((n_prompt > call.n_prompt) & (n_prompt >= end_len) & (parent_end <= end_len))
        changes: list[Relink] = []
        last = int(call.sampled_ids[-1]) if call.n_sampled else int(prompt[-1])
        for d in maybe.tolist():
            other_prompt = self.calls[d].prompt_ids
            if d == i or other_prompt is None:
                continue
            if int(other_prompt[end_len - 1]) != last or not end_is_prefix(call, other_prompt):
                continue
            current = self.parents[d]
            if current is not None and self.linked_by[d] == TOKENS:
                if self.calls[current].n_end == end_len and not key < self.keys[current]:
                    continue
            previous = current
            self._set(d, i, TOKENS)
            changes.append(Relink(d, i, TOKENS, previous, False))
        return changes

    # -- messages (only for calls without prompt ids) ---------------------------------------------

    def _index_messages(self, i: int) -> list[Relink]:
        call = self.calls[i]
        key = self.keys[i]
        changes: list[Relink] = []
        if call.prompt_ids is None and call.request_messages is not None:
            request = [canonical(m) for m in call.request_messages]
            stripped = strip_leading_system(request)
            self._needing[i] = (stripped, len(request))
            best: tuple[int, int] | None = None
            for k in range(len(stripped), 0, -1):
                for j in self._turns.get(tuple(stripped[:k]), ()):
                    full = self._end_len[j]
                    if self.keys[j] < key and full <= len(request) and _better(full, j, best, self.keys):
                        best = (full, j)
            if best is not None:
                self._best[i] = best
                self._set(i, best[1], MESSAGES)
        if call.request_messages is None or call.response_message is None:
            return changes
        end = [canonical(m) for m in call.request_messages] + [canonical(call.response_message, "assistant")]
        stripped_end = strip_leading_system(end)
        if not stripped_end:
            return changes
        self._turns.setdefault(tuple(stripped_end), []).append(i)
        self._end_len[i] = len(end)
        for d, (stripped, full_len) in self._needing.items():
            if d == i or not key < self.keys[d] or len(end) > full_len or len(stripped_end) > len(stripped):
                continue
            if stripped[: len(stripped_end)] != stripped_end or not _better(len(end), i, self._best.get(d), self.keys):
                continue
            previous = self.parents[d]
            self._best[d] = (len(end), i)
            self._set(d, i, MESSAGES)
            changes.append(Relink(d, i, MESSAGES, previous, False))
        return changes


def _better(full: int, j: int, best: tuple[int, int] | None, keys: list[Any]) -> bool:
    """Longest full message list wins; on a tie, the smallest key."""
    if best is None:
        return True
    return full > best[0] or (full == best[0] and keys[j] < keys[best[1]])
