"""A naive, obviously-correct implementation of the linking rules in docs/semantics.md, written the way the rules read:
every arrival scans every existing node, on plain Python lists. The fast implementation in
graph/linking.py must agree with it exactly. The benchmarks reuse it as the naive baseline."""

from __future__ import annotations

from rollout_graph.core.messages import canonical, strip_leading_system


def _end(prompt, sampled):
    return [] if prompt is None else list(prompt) + list(sampled)


def reference_token_parents(calls: list[tuple[list[int] | None, list[int]]]) -> list[int | None]:
    """``calls`` are (prompt ids or None, sampled ids) in arrival order."""
    parents: list[int | None] = []
    ends: list[list[int]] = []
    prompts: list[list[int] | None] = []
    for n, (prompt, sampled) in enumerate(calls):
        prompt = None if prompt is None else list(prompt)
        end = _end(prompt, sampled)
        # Rule 1: longest existing end that prefixes the prompt; the earliest on ties.
        best = None
        if prompt:
            for c in range(n):
                c_end, c_prompt = ends[c], prompts[c]
                if c_prompt is None:
                    continue
                if 0 < len(c_end) <= len(prompt) and len(c_prompt) < len(prompt) and prompt[: len(c_end)] == c_end:
                    if best is None or len(c_end) > len(ends[best]):
                        best = c
        parents.append(best)
        ends.append(end)
        prompts.append(prompt)
        # Rule 2: late ancestors adopt existing nodes they are closer to.
        if end:
            for d in range(n):
                d_prompt = prompts[d]
                if d_prompt is None or len(d_prompt) <= len(prompt or []):
                    continue
                if len(end) <= len(d_prompt) and d_prompt[: len(end)] == end:
                    current = parents[d]
                    if current is None or len(ends[current]) < len(end):
                        parents[d] = n
    return parents


def reference_message_parents(calls) -> dict[int, int]:
    """``calls`` are graph Call objects; message fallback for those without prompt ids."""
    parents = {}
    for n, call in enumerate(calls):
        if call.prompt_ids is not None or call.request_messages is None:
            continue
        request = [canonical(m) for m in call.request_messages]
        stripped = strip_leading_system(request)
        best = None
        for c in range(n):
            cand = calls[c]
            if cand.request_messages is None or cand.response_message is None:
                continue
            end = [canonical(m) for m in cand.request_messages] + [canonical(cand.response_message, "assistant")]
            if len(end) > len(request):
                continue
            cs = strip_leading_system(end)
            if not cs or len(cs) > len(stripped) or stripped[: len(cs)] != cs:
                continue
            if best is None or len(end) > best[0]:
                best = (len(end), c)
        if best is not None:
            parents[n] = best[1]
    return parents


def reference_correction(name: str, params: dict, rows: list[list[float | None]]) -> dict:
    """A naive off-policy correction (docs/corrections.md), the way the definitions read, on plain
    lists: ``rows`` hold each row's ``d`` per compared position (``None`` = not compared; an
    infinite ``d`` counts as +-20). Returns the totals ``inspect --json`` reports."""
    import math

    def bounded(x: float) -> float:
        return math.exp(max(-20.0, min(20.0, x)))

    n_tokens = n_sequences = tokens_affected = sequences_affected = 0
    weight_lost = sum_w = sum_w2 = 0.0
    for row in rows:
        ds = [max(-20.0, min(20.0, x)) for x in row if x is not None]
        if not ds:
            continue
        n_tokens += len(ds)
        n_sequences += 1
        weights, hits = [], 0
        if name in ("token_tis", "token_mask"):
            for x in ds:
                r = bounded(x)
                if name == "token_tis":
                    hit = r > params["cap"]
                    w = params["cap"] if hit else r
                    weight_lost += r - w
                else:
                    hit = r < params["low"] or r > params["high"]
                    w = 0.0 if hit else r
                    weight_lost += r if hit else 0.0
                hits += hit
                weights.append(w)
        else:
            total = 0.0
            for x in ds:
                total += x
            ratio = bounded(total / len(ds) if name == "geo_mask" else total)
            if name == "seq_tis":
                hit = ratio > params["cap"]
                w = params["cap"] if hit else ratio
                weight_lost += ratio - w
            else:
                hit = ratio < params["low"] or ratio > params["high"]
                w = 0.0 if hit else ratio
                weight_lost += ratio if hit else 0.0
            hits = len(ds) if hit else 0
            weights = [w] * len(ds)
        tokens_affected += hits
        sequences_affected += hits > 0
        sum_w += sum(weights)
        sum_w2 += sum(w * w for w in weights)
    return {
        "n_tokens": n_tokens,
        "n_sequences": n_sequences,
        "tokens_affected": tokens_affected,
        "sequences_affected": sequences_affected,
        "share_tokens": tokens_affected / n_tokens if n_tokens else None,
        "weight_lost": weight_lost,
        "ess": sum_w * sum_w / (n_tokens * sum_w2) if n_tokens and sum_w2 > 0 else None,
    }


def reference_discarded(prompts: list[list[int] | None], parents: list[int | None]) -> dict[int, int]:
    """docs/semantics.md "Discarded", read literally: sibling groups are the children of every
    call with two or more children, and the roots with identical non-empty prompts; in a group
    where some member has children, every childless member is discarded, continued by the
    earliest member with children. Returns discarded call -> the member that continued."""
    n = len(parents)
    children: list[list[int]] = [[c for c in range(n) if parents[c] == p] for p in range(n)]
    groups = [kids for kids in children if len(kids) > 1]
    roots: dict[tuple[int, ...], list[int]] = {}
    for r in range(n):
        if parents[r] is None and prompts[r]:
            roots.setdefault(tuple(prompts[r] or ()), []).append(r)
    groups += [g for g in roots.values() if len(g) > 1]
    discarded: dict[int, int] = {}
    for group in groups:
        continuing = sorted(m for m in group if children[m])
        for m in group:
            if continuing and not children[m]:
                discarded[m] = continuing[0]
    return discarded


def reference_similar(a: str, b: str, share: float = 0.5, compared: int = 4000) -> bool:
    """Two system texts are one prompt re-rendered (docs/semantics.md, "Why a call broke") when their
    word 3-gram sets (single words when either text is under 20 words), over the first ``compared``
    characters, share at least ``share`` of their union: the sets built as sets of word tuples."""
    if a == b:
        return True
    short = min(len(a[:compared].split()), len(b[:compared].split())) < 20

    def grams(text: str) -> set[tuple[str, ...]]:
        words = text[:compared].split()
        if not short:
            return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
        return {(w,) for w in words}

    if not a or not b:
        return False
    grams_a, grams_b = grams(a), grams(b)
    if not grams_a or not grams_b:
        return False
    return len(grams_a & grams_b) / len(grams_a | grams_b) >= share


def _reference_strings(value, out: list) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("role", "type", "id", "tool_call_id", "call_id", "tool_use_id"):
                _reference_strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _reference_strings(item, out)


def reference_message_text(message) -> str:
    """Every string of a message but its role, part types and ids, newline-joined (the walk, always)."""
    out: list[str] = []
    _reference_strings(message, out)
    return "\n".join(out)


def reference_search(rollout, decoder, text: str, regex: bool = False, ignore_case: bool = False) -> list[dict]:
    """Every hit of graph/analysis/search.py's ``search`` as ``Hit.as_dict`` gives it, found the slow
    way: every message of every call searched on its own (no distinct texts), always with a compiled
    pattern (plain text escaped), every span decoded again and every token's end offset summed."""
    import re

    import numpy as np

    from rollout_graph.analysis.search import snippet

    pattern = re.compile(text if regex else re.escape(text), re.IGNORECASE if ignore_case else 0)
    hits: list[dict] = []
    sid = rollout.session_id

    def hit(i: int, where: str, body: str, extra: dict) -> dict:
        found = pattern.search(body)
        assert found is not None
        return {
            "session_id": sid,
            "node_id": rollout.calls[i].node_id,
            "index": i,
            "where": where,
            **extra,
            "char_offset": found.start(),
            "count": len(list(pattern.finditer(body))),
            "snippet": snippet(body, *found.span()),
        }

    for i, call in enumerate(rollout.calls):
        messages = [reference_message_text(m) for m in call.request_messages or []]
        with_match = [m for m, body in enumerate(messages) if pattern.search(body)]
        if with_match:
            m = with_match[0]
            message = call.request_messages[m]
            role = str(message.get("role", "")) if isinstance(message, dict) else ""
            one = hit(i, "message", messages[m], {"message_index": m, "role": role})
            one["count"] = sum(len(list(pattern.finditer(body))) for body in messages)
            hits.append(one)
        if call.response_message is not None:
            body = reference_message_text(call.response_message)
            if pattern.search(body):
                hits.append(hit(i, "response", body, {}))
        if decoder is None:
            continue
        for where in ("sampled", "context"):
            if where == "sampled":
                ids, first = call.sampled_ids, 0
            else:
                first = rollout.context_start(i)
                ids = None if call.prompt_ids is None else call.prompt_ids[first:]
            if ids is None or not len(ids):
                continue
            pieces = decoder.pieces(ids)
            body = "".join(pieces)
            found = pattern.search(body)
            if found is None:
                continue
            ends = [sum(len(p) for p in pieces[: k + 1]) for k in range(len(pieces))]
            token = int(np.searchsorted(np.array(ends, dtype=np.int64), found.start(), side="right"))
            hits.append(hit(i, where, body, {"token_index": first + token}))
    return hits
