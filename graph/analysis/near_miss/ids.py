"""What the near-miss analysis reads of a call's token ids, and the searches that keep it fast.

- ``common_prefix``, ``_first_difference`` (one C loop where the speedups are built:
  rollout_graph.ingest.speedups), ``prompt_of``, ``end_ids``: where a later prompt leaves an
  earlier call's end ids.
- ``align`` / ``replay_alignment``: two tokenizations of one reply walked side by side (which
  sampled ids a replay changed); ``same_text``: a tokenizer's view of the same.
- ``_Ends`` and ``_best_candidate``: every call's end ids in sorted order, so the call sharing the
  longest prefix with a prompt is found among a few neighbours (tests/analysis/test_near_miss_ends.py).
- ``_SamePrompt`` / ``_prompt_groups``: identical prompts by fingerprint, so a retry is a lookup.
- ``_Replies`` / ``_breaks_inside_reply``: which requests may replay an earlier reply (only those
  are read back; tests/analysis/test_near_miss_reads.py).

The search (graph/analysis/near_miss/search.py) uses these; nothing here decides a kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.core.ids import same_ids, same_memory
from rollout_graph.core.records import EMPTY_IDS, Call
from rollout_graph.ingest import speedups


def _prompt(call: Call) -> np.ndarray:
    """The prompt ids of a call (empty when it has none: a trace may mix calls with and without
    prompt ids in one fork, and the id searches must pass such a call over, never fail on it)."""
    return call.prompt_ids if call.prompt_ids is not None else EMPTY_IDS


def _first_difference(a: np.ndarray, b: np.ndarray) -> int:
    """The first index where two 1-d arrays of one length differ (their length when none does):
    ``argmax`` of the comparison stops at its first True, where ``flatnonzero`` lists them all
    (one C loop where both are contiguous ids of one width: ``speedups.native.first_difference``)."""
    native = speedups.native
    if native is not None:
        at = native.first_difference(a, b)
        if at is not None:
            return at
    differ = a != b
    n = differ.shape[0]
    if not n:
        return 0
    at = int(differ.argmax())
    return at if differ[at] else n


def common_prefix(earlier: Call, prompt: np.ndarray) -> int:
    """Length of the common prefix of ``earlier``'s end ids and ``prompt`` (0 when the earlier
    call has no prompt ids: its sampled ids alone are no prefix of anything)."""
    if earlier.prompt_ids is None:
        return 0
    mine = earlier.prompt_ids
    n_e, n = mine.shape[0], prompt.shape[0]
    n_p = min(n_e, n)
    at = _first_difference(mine[:n_p], prompt[:n_p])
    if at < n_p or n_p < n_e:
        return at
    sampled = earlier.sampled_ids
    rest = min(sampled.shape[0], n - n_p)
    return n_p + _first_difference(sampled[:rest], prompt[n_p : n_p + rest])


def prompt_of(call: Call) -> np.ndarray:
    """The call's prompt ids (empty when it has none)."""
    return call.prompt_ids if call.prompt_ids is not None else EMPTY_IDS


def end_ids(call: Call) -> np.ndarray:
    """The call's prompt ids followed by its sampled ids."""
    return np.concatenate([call.prompt_ids, call.sampled_ids]) if call.prompt_ids is not None else call.sampled_ids


def same_text(decoder: Decoder | None, earlier: Call, later: Call, at: int) -> bool | None:
    """Whether the earlier call's end ids from ``at`` decode to exactly the text the later prompt
    goes on with (None: no tokenizer to tell)."""
    if not isinstance(decoder, TokenizerDecoder):
        return None
    rest = end_ids(earlier)[at:]
    if not rest.shape[0]:
        return False
    target = decoder.text(rest)
    text = ""
    for piece in decoder.pieces(prompt_of(later)[at : at + 4 * rest.shape[0] + 8]):
        text += piece
        if len(text) >= len(target):
            break
    return bool(target) and text.startswith(target)


@dataclass(frozen=True, slots=True)
class Alignment:
    """The earlier call's sampled ids from the break against the later prompt from the break:
    ``segments`` are the differing spans (earlier start, end; later start, end), ``changed`` how
    many sampled ids are in them, ``synced`` whether the two sides meet again at the sampled end."""

    changed: int
    segments: tuple[tuple[int, int, int, int], ...]
    synced: bool


def align(sampled: np.ndarray, replay: np.ndarray, anchor: int = 3, reach: int = 8) -> Alignment:
    """Walk two tokenizations of (nearly) one text: equal ids step together; at a difference, the
    nearest point where ``anchor`` ids agree again (each side at most ``reach`` ahead) closes the
    differing span. Linear in the sampled length."""
    n, m = sampled.shape[0], replay.shape[0]
    i = j = changed = 0
    segments = []
    while i < n:
        if j < m and sampled[i] == replay[j]:
            i, j = i + 1, j + 1
            continue
        step = None
        for total in range(1, 2 * reach + 1):
            for di in range(max(0, total - reach), min(total, reach) + 1):
                a, b = i + di, j + total - di
                width = min(anchor, n - a)
                if width > 0 and b + width <= m and np.array_equal(sampled[a : a + width], replay[b : b + width]):
                    step = (di, total - di)
                    break
            if step is not None:
                break
        if step is None:
            segments.append((i, n, j, min(m, j + n - i)))
            return Alignment(changed + n - i, tuple(segments), False)
        segments.append((i, i + step[0], j, j + step[1]))
        changed += step[0]
        i, j = i + step[0], j + step[1]
    return Alignment(changed, tuple(segments), True)


def replay_alignment(earlier: Call, later: Call, shared: int) -> Alignment:
    """:func:`align` for a break at ``shared`` inside the earlier call's sampled span (indices are
    into the earlier call's sampled ids and the later prompt)."""
    k = max(0, shared - earlier.n_prompt)
    rest = earlier.sampled_ids[k:]
    replay = prompt_of(later)[shared : shared + 2 * rest.shape[0] + 16]
    found = align(rest, replay)
    segments = tuple((a + k, b + k, c + shared, d + shared) for a, b, c, d in found.segments)
    return Alignment(found.changed, segments, found.synced)


class _Replies:
    """The calls with a reply so far, grouped by their prompt's first ``LEAD`` ids, so that a request
    whose prompt no earlier reply's call could be broken inside (:meth:`may_replay`) is never read.

    A reply can be the one a later request replays (:func:`text_replays`) only when the later prompt
    shares at least the earlier call's whole prompt and breaks inside its sampled span; such a call
    starts with the same ``LEAD`` ids (or has a shorter prompt: those are kept apart and always
    compared). Only the calls of one group are compared, and none when the group is larger than
    ``MOST`` (one long conversation: the request is read, as it would be without the groups)."""

    LEAD = 16
    MOST = 8

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls
        self.groups: dict[int, list[int]] = {}
        self.short: list[int] = []  # calls whose prompt is under LEAD ids
        self._last: tuple[int, int | None] = (-1, None)  # the last call's lead

    def _lead(self, i: int) -> int | None:
        """A hash of the call's first ``LEAD`` ids (of their values, whatever the array's width):
        equal leads, equal hashes; two leads that share a hash only put more calls in a group."""
        if self._last[0] != i:
            prompt = _prompt(self.calls[i])
            lead = prompt[: self.LEAD].astype(np.int64, copy=False).tobytes() if prompt.shape[0] >= self.LEAD else None
            self._last = (i, None if lead is None else hash(lead))
        return self._last[1]

    def add(self, e: int) -> None:
        lead = self._lead(e)
        if lead is None:
            self.short.append(e)
        else:
            self.groups.setdefault(lead, []).append(e)

    def may_replay(self, i: int) -> bool:
        """Whether some call added before may share its whole prompt with call ``i``'s prompt and
        break inside its sampled span (False: none does, for certain)."""
        prompt = _prompt(self.calls[i])
        lead = self._lead(i)
        group = self.groups.get(lead, ()) if lead is not None else ()
        if len(group) + len(self.short) > self.MOST:
            return True
        for candidates in (self.short, group):
            for e in candidates:
                if _breaks_inside_reply(self.calls[e], prompt):
                    return True
        return False


def _breaks_inside_reply(earlier: Call, prompt: np.ndarray) -> bool:
    """``earlier.n_prompt <= common_prefix(earlier, prompt) < earlier.n_end``, comparing no more
    than it must: a prompt that goes on with all of the earlier call's sampled ids (its own reply
    continued) is passed over before its first part is compared (known from the memory when both
    are views of one id arena from the same start; never for an earlier call without prompt ids)."""
    if earlier.prompt_ids is None:
        return False
    mine = earlier.prompt_ids
    n_e, n = mine.shape[0], prompt.shape[0]
    if n_e > n or (n_e and prompt[n_e - 1] != mine[n_e - 1]):
        return False  # the prompt does not start with the earlier prompt
    sampled = earlier.sampled_ids
    n_end = n_e + sampled.shape[0]
    if n >= n_end and _first_difference(prompt[n_e:n_end], sampled) == n_end - n_e:
        return False  # it shares the earlier call's end ids, or breaks before its sampled span
    return n_e == 0 or same_memory(prompt, mine) or _first_difference(prompt[:n_e], mine) == n_e


def _key(ids: np.ndarray, wide: bool) -> bytes:
    """Big-endian bytes: their lexicographic order is the order of the id sequences."""
    return ids.astype(">u8" if wide else ">u4").tobytes()


def _end_slice(call: Call, start: int, stop: int) -> np.ndarray:
    """The call's end ids ``[start:stop]`` (prompt then sampled), a view when it lies in one part."""
    prompt = _prompt(call)
    n = prompt.shape[0]
    if stop <= n:
        return prompt[start:stop]
    if start >= n:
        return call.sampled_ids[start - n : stop - n]
    return np.concatenate([prompt[start:], call.sampled_ids[: stop - n]])


def _first_item(pair: tuple[Any, ...]) -> Any:
    return pair[0]


@dataclass
class _Ends:
    """Every call's end ids in sorted order: the call sharing the longest prefix with a prompt sits
    next to where the prompt would sort, so a search looks at a few neighbours, not at every call.

    The order is the one of the end ids cut to ``limit`` tokens (the longest prompt that will be
    looked up: a shared prefix can never be longer than the prompt, so the cut changes no answer),
    as big-endian keys, equal keys in call order. No key is kept: the calls are sorted chunk by
    chunk (``CHUNK`` tokens; only calls tied on every earlier chunk compare the next), so at most
    one chunk of each call is copied at a time, and a prompt finds its place by comparing ids."""

    nodes: list[int]
    wide: bool
    limit: int
    rank: dict[int, int]  # node -> its index in ``nodes``
    BUDGET = 1 << 20  # ids copied at a time while sorting (4 MB, 8 with 64-bit ids)
    CHUNK = 128  # the fewest ids compared per call in one round

    @classmethod
    def of(
        cls,
        calls: list[Call],
        nodes: list[int],
        limit: int,
        budget: int | None = None,
        n_ends: Sequence[int] | None = None,
    ) -> _Ends:
        """The calls ``nodes`` (in call order) sorted by their end ids cut to ``limit`` tokens
        (``n_ends``: every call's ``n_end``, indexed by call, when the caller has them)."""
        wide = any(_prompt(calls[i]).dtype.itemsize > 4 or calls[i].sampled_ids.dtype.itemsize > 4 for i in nodes)
        dtype = ">u8" if wide else ">u4"  # as _key writes them
        n_end: Sequence[int] | dict[int, int] = {i: calls[i].n_end for i in nodes} if n_ends is None else n_ends
        order = list(nodes)
        todo = [(0, len(order), 0)]  # segments of ``order`` tied on every id before ``start``
        while todo:
            lo, hi, start = todo.pop()
            # a segment's calls copy ``budget`` ids in all: the fewer calls tie, the longer the chunk
            stop = min(start + max(cls.CHUNK, (budget or cls.BUDGET) // (hi - lo)), limit)
            keyed = []
            for i in order[lo:hi]:  # _key(_end_slice(calls[i], start, min(stop, n_end[i])), wide), inlined
                call = calls[i]
                prompt = _prompt(call)
                n, end = prompt.shape[0], min(stop, n_end[i])
                if end <= n:
                    part = prompt[start:end]
                elif start >= n:
                    part = call.sampled_ids[start - n : end - n]
                else:
                    part = np.concatenate([prompt[start:], call.sampled_ids[: end - n]])
                keyed.append((part.astype(dtype).tobytes(), i))
            keyed.sort(key=_first_item)  # stable: ties stay in call order
            order[lo:hi] = [i for _, i in keyed]
            if stop >= limit:
                continue
            full = (stop - start) * (8 if wide else 4)
            run = 0
            for j in range(1, len(keyed) + 1):
                if j == len(keyed) or keyed[j][0] != keyed[run][0]:
                    if j - run > 1 and len(keyed[run][0]) == full:  # tied on a whole chunk: the next decides
                        todo.append((lo + run, lo + j, stop))
                    run = j
        return cls(order, wide, limit, {node: j for j, node in enumerate(order)})

    def _before(self, call: Call, prompt: np.ndarray) -> bool:
        """Whether the call's end ids, cut to ``limit``, sort before ``prompt`` (as the keys would)."""
        shared = common_prefix(call, prompt)
        if shared == prompt.shape[0]:
            return False  # the prompt is a prefix of the ends (or equal): not before
        if shared >= call.n_end:
            return True  # the ends are a proper prefix of the prompt
        return _key(_end_slice(call, shared, shared + 1), self.wide) < _key(prompt[shared : shared + 1], self.wide)

    def position(self, calls: list[Call], prompt: np.ndarray, hint: int | None = None) -> int:
        """Where ``prompt`` would sort among the ends (bisect_left: before any equal ends).

        ``hint`` is an index known not to sort before the prompt (the call's own ends, which start
        with the prompt): the search gallops back from it, so a prompt next to its own ends costs
        a comparison or two instead of a whole binary search."""
        lo, hi = 0, len(self.nodes)
        if hint is not None:
            hi, step = hint, 1
            while hi - step >= 0 and not self._before(calls[self.nodes[hi - step]], prompt):
                hi -= step
                step *= 2
            lo = max(0, hi - step)  # sorts before the prompt (or is 0)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._before(calls[self.nodes[mid]], prompt):
                lo = mid + 1
            else:
                hi = mid
        return lo


TIES = 4  # calls sharing the longest prefix kept as candidates (a merged reply ties its recovery call) ...
TIED_SHARED = 32  # ... when they share at least this many ids (fewer: the first found alone)


def _best_candidates(
    calls: list[Call], node: int, ends: _Ends, root_of: list[int], order: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """The calls the node (a root) nearly continued by its ids: among the calls that arrived before
    it, except its own descendants (a child that arrived before its parent extends it exactly) and
    those with an identical prompt (retries, matched first), the ones whose end ids share the
    longest prefix with the node's prompt, as (shared, call), at most ``TIES`` of them (one when
    they share fewer than ``TIED_SHARED`` ids: the latest call before it when that one shares as
    many), in the order found. Walking away from the prompt's sorted position the shared prefix only shrinks, so each
    direction stops at the first candidate that shares less than the best found (or at ``TIES``).
    ``order`` is ``ends.nodes`` as an array: the calls that arrived after the node are passed over a
    block at a time, not one by one."""
    prompt = _prompt(calls[node])
    start = ends.position(calls, prompt, ends.rank.get(node))
    nodes = np.asarray(ends.nodes) if order is None else order
    best: list[tuple[int, int]] = []
    for step in (-1, 1):
        for c in _arrived_before(nodes, start, step, node):
            candidate = calls[c]
            if root_of[c] == node or same_ids(_prompt(candidate), prompt):
                continue
            shared = common_prefix(candidate, prompt)
            if best and shared < best[0][0]:
                break
            if best and shared == best[0][0]:
                if len(best) >= TIES or shared < TIED_SHARED:
                    break
                best.append((shared, c))
            else:
                best = [(shared, c)]
    if best and best[0][0] < TIED_SHARED:  # among equals the latest: the call that arrived last before it
        for c in range(node - 1, best[0][1], -1):
            candidate = calls[c]
            if candidate.prompt_ids is None or root_of[c] == node or same_ids(candidate.prompt_ids, prompt):
                continue
            if common_prefix(candidate, prompt) == best[0][0]:
                best = [(best[0][0], c)]
            break
    return best


def _best_candidate(
    calls: list[Call], node: int, ends: _Ends, root_of: list[int], order: np.ndarray | None = None
) -> tuple[int, int] | None:
    """The first of :func:`_best_candidates` (None: no earlier call with ids)."""
    found = _best_candidates(calls, node, ends, root_of, order)
    return found[0] if found else None


_FIRST_BLOCK = 16  # neighbours looked at first by the candidate walk (then 4x as many each time)


def _arrived_before(nodes: np.ndarray, start: int, step: int, node: int) -> Iterator[int]:
    """The calls of ``nodes`` below ``node``, walking from ``start`` (down from ``start - 1`` when
    ``step`` is -1, up from ``start`` when it is 1), in walk order; blocks grow 4x."""
    size = _FIRST_BLOCK
    if step < 0:
        hi = start
        while hi > 0:
            lo = max(0, hi - size)
            block = nodes[lo:hi]
            yield from block[block < node][::-1].tolist()
            hi, size = lo, size * 4
    else:
        lo, end = start, nodes.shape[0]
        while lo < end:
            hi = min(end, lo + size)
            block = nodes[lo:hi]
            yield from block[block < node].tolist()
            lo, size = hi, size * 4


def _fingerprint(ids: np.ndarray) -> tuple[int, int]:
    """(length, hash of the first, middle and last 16 ids): equal prompts have equal prints."""
    n, mid = len(ids), len(ids) // 2
    sample = np.concatenate([ids[:16], ids[max(0, mid - 8) : mid + 8], ids[-16:]]).astype(np.int64, copy=False)
    return n, hash(sample.tobytes())


class _SamePrompt:
    """Calls grouped by an exact prompt key, so "the first call with the same prompt" is a lookup:
    a parent with N children (or N identical re-sends) costs O(N), not O(N^2).

    The key is the fingerprint (length and 48 sampled ids, cheap on long prompts); a bucket that
    grows past a few calls is split by the whole prompt's bytes, so distinct prompts that share a
    fingerprint never make a lookup walk the bucket."""

    SPLIT = 8

    def __init__(
        self, calls: list[Call], scope: list[int | None] | None = None, prints: dict[int, tuple] | None = None
    ) -> None:
        self.calls = calls
        self.scope = scope  # group only within the same parent (None: across all calls)
        self.prints = {} if prints is None else prints  # node -> fingerprint, shared between groupings
        self.buckets: dict[tuple, list[int]] = {}
        self.exact: dict[tuple, dict[bytes, list[int]]] = {}

    def _print(self, node: int) -> tuple:
        fingerprint = self.prints.get(node)
        if fingerprint is None:
            fingerprint = self.prints[node] = _fingerprint(_prompt(self.calls[node]))
        return (None if self.scope is None else self.scope[node], *fingerprint)

    def add(self, node: int) -> None:
        if self.calls[node].prompt_ids is None:
            return  # no prompt ids: the same prompt as nothing
        key = self._print(node)
        bucket = self.buckets.setdefault(key, [])
        bucket.append(node)
        if key in self.exact:
            self.exact[key].setdefault(_prompt(self.calls[node]).tobytes(), []).append(node)
        elif len(bucket) > self.SPLIT:
            split: dict[bytes, list[int]] = {}
            for member in bucket:
                split.setdefault(_prompt(self.calls[member]).tobytes(), []).append(member)
            self.exact[key] = split

    def members(self, node: int) -> list[int]:
        """Every added call whose prompt equals the node's, in the order they were added (none for a
        call without prompt ids)."""
        if self.calls[node].prompt_ids is None:
            return []
        key = self._print(node)
        prompt = _prompt(self.calls[node])
        if key in self.exact:
            return self.exact[key].get(prompt.tobytes(), [])
        return [m for m in self.buckets.get(key, ()) if same_ids(_prompt(self.calls[m]), prompt)]

    def first(self, node: int, accept=lambda m: True) -> int | None:
        """The first added call (other than the node) with the same prompt that ``accept`` takes."""
        for member in self.members(node):
            if member != node and accept(member):
                return member
        return None


def _last_before(topology, start: int, before: int, reach: int = 20_000) -> int:
    """The call that arrived last before ``before`` in the subtree of ``start`` (``start`` itself
    when nothing in it arrived earlier than ``before``), looking at no more than ``reach`` calls."""
    best, stack = start, [start]
    while stack and reach > 0:
        node = stack.pop()
        reach -= 1
        if best < node < before:
            best = node
        stack.extend(topology.children[node])
    return best


def _prompt_groups(
    calls: list[Call], parents: list[int | None], explained: list[int], n_prompts: list[int] | None = None
) -> tuple[_SamePrompt, _SamePrompt]:
    """The calls grouped by identical prompt: across all calls (``same``: looked up only for the
    ``explained`` roots) and among one parent's children or the roots (``siblings``). Only calls
    that can be a twin are added, since an identical prompt has the same length: to ``same`` the
    calls of a length some explained root has, to ``siblings`` the calls that share their parent and
    length with another call. The lookups answer what they answer with every call added
    (tests/analysis/test_near_miss_fast.py), at a fraction of the fingerprints. ``n_prompts``: every call's
    ``n_prompt``, when the caller has them."""
    n = [c.n_prompt for c in calls] if n_prompts is None else n_prompts
    prompted = [i for i, k in enumerate(n) if k]  # (a call without prompt ids has n_prompt 0)
    lengths = {n[r] for r in explained}
    same = _SamePrompt(calls)
    for i in prompted:
        if n[i] in lengths:
            same.add(i)
    siblings = _SamePrompt(calls, scope=parents, prints=same.prints)
    scoped = Counter([(parents[i], n[i]) for i in prompted])
    for i in prompted:
        if scoped[parents[i], n[i]] > 1:
            siblings.add(i)
    return same, siblings
