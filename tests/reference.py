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
