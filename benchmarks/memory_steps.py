"""Resident memory of a cold ``inspect --json`` in one process, step by step: import, load (read +
parse), link, analyse, print. ``python benchmarks/memory_steps.py TRACE.jsonl`` prints one JSON
line: after each step the resident set now (``rss_*``, /proc/self/status VmRSS) and the peak so
far (``peak_*``, VmHWM), in MB; what the loaded calls hold (prompt ids as arrays vs the id
arena's written part, sampled ids, logprobs; how many calls' request messages stay in the file,
``messages_left_*``, and their JSON's bytes); and the peak per token (the goal is 8 bytes). The
trace is loaded as the command loads it without a cache (``leave_messages``).

Memory is not time: unlike the timing benchmarks one run is enough (it is deterministic up to the
allocator's order), and a busy machine does not change it. The whole command's peak
(``/usr/bin/time -f %M python -m rollout_graph inspect --json --no-cache FILE``) is within a few
MB of ``peak_print`` (this script imports a little more).
"""

from __future__ import annotations

import sys


def _status() -> tuple[float, float]:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                name, value = line.split(":")
                fields[name] = int(value.split()[0]) / 1e3
    return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)


def _written(arrays: list) -> int:
    """Bytes of the id arenas covered by at least one view (each arena's union of intervals), plus
    every array that is not a view of an arena: the loader's own measure (``held_bytes``)."""
    from rollout_graph.ingest.shortcuts.id_arrays import held_bytes

    return held_bytes(arrays)


def main(path: str) -> None:
    figures: dict[str, float] = {}

    def step(name: str) -> None:
        figures[f"rss_{name}"], figures[f"peak_{name}"] = _status()

    import orjson

    from rollout_graph.analysis.decode import decoder_for
    from rollout_graph.cli.common import _return_free_memory
    from rollout_graph.core.linking import link
    from rollout_graph.core.records import messages_left_in_file
    from rollout_graph.ingest.load.files import load_files
    from rollout_graph.pipeline import analyse
    from rollout_graph.reports.contract import inspect_json

    step("import")
    loaded = load_files([path], use_cache=False, leave_messages=True)  # as the command loads
    step("load")
    calls = [c for s in loaded.sessions.values() for c in s.calls]
    left = [messages_left_in_file(c) for c in calls]
    prompts = [c.prompt_ids for c in calls if c.prompt_ids is not None]
    tokens = sum(c.n_prompt + c.n_sampled for c in calls)
    held = {
        "prompt_ids_mb": round(sum(p.nbytes for p in prompts) / 1e6, 1),
        "prompt_ids_written_mb": round(_written(prompts) / 1e6, 1),
        "sampled_ids_mb": round(sum(c.sampled_ids.nbytes for c in calls) / 1e6, 1),
        "logprobs_mb": round(sum(c.sampled_logprobs.nbytes for c in calls if c.sampled_logprobs is not None) / 1e6, 1),
        "messages_left_in_file": sum(1 for m in left if m is not None),
        "messages_left_mb": round(sum(m.size for m in left if m is not None) / 1e6, 1),
    }
    links = {sid: link(s.calls) for sid, s in loaded.sessions.items()}
    step("link")
    rollouts = [
        analyse(s, links=links[sid], decoder=decoder_for(s.calls, [], None, False))
        for sid, s in loaded.sessions.items()
    ]
    _return_free_memory()  # as the command does once the rollouts are analysed
    step("analyse")
    out = orjson.dumps(inspect_json(loaded, rollouts, with_tokens=False), option=orjson.OPT_SERIALIZE_NUMPY)
    step("print")
    summary = {"calls": len(calls), "tokens": tokens, "bytes_out": len(out)}
    summary["peak_bytes_per_token"] = round(figures["peak_print"] * 1e6 / max(tokens, 1), 2)
    print(orjson.dumps(figures | held | summary).decode())


if __name__ == "__main__":
    main(sys.argv[1])
