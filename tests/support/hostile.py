"""A corpus of malformed and hostile trace files, each with good records around the bad one.

``python -m tests.support.hostile OUT_DIR`` writes every case to a folder (to try the CLI by hand);
tests/cli/test_hostile.py runs each through inspect, export, explain and audit. A case names what
must hold: which good neighbours load, what a skipped record's reason says, which finding the
degraded record carries, whether a line is pending. Bombs are written small; the tests lower the
limits (``flags``) to prove each limit works.
"""

from __future__ import annotations

import copy
import gzip
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.builders import Turn, chat_stream, completions, jsonl, vllm_chat

SESSION = "s1"


def good(call_id: str, prompt: list[int], sampled: list[int]) -> dict:
    """A plain, valid vLLM chat record."""
    return vllm_chat(Turn(call_id, prompt, sampled))


# Markup a trace may carry in its ids, file names and texts: none of it may become live on a page
# (tests/project/test_escape.py, tests/browser/test_browser_hostile.py). 203.0.113.0/24 is TEST-NET-3: never routed.
MARKUP = {
    "image": "![x](http://203.0.113.9/x.png)",
    "html": "<img src=http://203.0.113.9/y.png>",
    "bold": "**bold**",
    "directive": ":red[x]",
    "math": "$x^2$",
    "autolink": "http://evil.example",
    "www": "www.evil.example",
    "script": "<script>window.__pwned=1</script>",
}

BEFORE = good("before", [1, 2, 3], [4, 5])
AFTER = good("after", [1, 2, 3, 4, 5, 9], [6])
NEIGHBOURS = ("before", "after")


@dataclass
class Case:
    """One hostile file: how to write it, and what a load of it must show."""

    name: str
    write: Callable[[Path], None]
    suffix: str = ".jsonl"
    loads: tuple[str, ...] = NEIGHBOURS  # node ids that must be loaded
    skipped: str | None = None  # a substring of one skipped record's reason
    finding: str | None = None  # a finding code the bad record must carry when it loads
    pending: int = 0
    flags: list[str] = field(default_factory=list)  # limits lowered for this case
    bomb: bool = False  # run in a subprocess with an address-space limit


def _around(bad: bytes | str | dict | list) -> Callable[[Path], None]:
    """Good record, the bad line, good record."""

    def write(path: Path) -> None:
        middle = bad if isinstance(bad, bytes) else (bad if isinstance(bad, str) else json.dumps(bad)).encode()
        path.write_bytes(jsonl([BEFORE]) + middle + b"\n" + jsonl([AFTER]))

    return write


def _bad(mutate: Callable[[dict], None], base: dict | None = None) -> dict:
    record = copy.deepcopy(base if base is not None else good("bad", [1, 2, 3, 7], [8]))
    mutate(record)
    return record


def _set(path: str, value) -> Callable[[dict], None]:
    def mutate(record: dict) -> None:
        keys = path.split(".")
        node = record
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _stream(mutate: Callable[[list], None]) -> dict:
    record = chat_stream(Turn("bad", [1, 2, 3, 7], [8, 9]))
    mutate(record["response"])
    return record


def _tool_delta(index, name="f") -> Callable[[list], None]:
    def mutate(chunks: list) -> None:
        chunks.insert(
            2,
            {
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": index, "function": {"name": name, "arguments": "{}"}}]},
                    }
                ],
            },
        )

    return mutate


def _choices_int(chunks: list) -> None:
    chunks.insert(1, {"object": "chat.completion.chunk", "choices": 7})


def _cut_stream(chunks: list) -> None:
    """The stream stops before its finish chunk and its [DONE]."""
    del chunks[-2:]


def _deep(n: int) -> str:
    return '{"request": {}, "response": ' + "[" * n + "]" * n + "}"


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6)


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _good_lines(n: int) -> bytes:
    return jsonl([BEFORE] + [good(f"g{i}", [1, 2, 3], [4 + i]) for i in range(n)])


def _write_bytes(data: Callable[[], bytes]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data())

    return write


def _corrupt_gzip() -> bytes:
    data = bytearray(_gzip(_good_lines(200) + jsonl([AFTER])))
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    return bytes(data)


def _truncated(compress: Callable[[bytes], bytes]) -> Callable[[], bytes]:
    def data() -> bytes:
        packed = compress(_good_lines(2000))
        return packed[: len(packed) * 3 // 4]

    return data


def _pzstd_like() -> bytes:
    """What ``pzstd`` writes: a skippable frame (its index) before each zstd frame."""
    import struct

    def skippable(payload: bytes) -> bytes:
        return struct.pack("<II", 0x184D2A50, len(payload)) + payload

    first, second = _good_lines(500), jsonl([AFTER])
    return skippable(b"\x00\x00\x10\x00") + _zstd(first) + skippable(b"\x01\x00\x00\x00") + _zstd(second)


def _corrupt_zstd() -> bytes:
    data = bytearray(_zstd(_good_lines(2000)))
    data[len(data) // 2 : len(data) // 2 + 64] = b"\x00" * 64
    return bytes(data)


def _document_with_cycle() -> dict:
    """An OpenEnv rollout document whose claimed parents loop (a -> b -> a) and a self-parent."""
    turns = [
        {"node_id": "a", "n_prompt": 2, "n_sampled": 1},
        {"node_id": "b", "n_prompt": 3, "n_sampled": 1},
        {"node_id": "c", "n_prompt": 2, "n_sampled": 1},
    ]
    return {
        "session_id": "doc",
        "turns": turns,
        "sequences": [
            {"node_ids": ["x", "a"], "input_ids": [1, 2, 3, 4], "loss_mask": [0, 0, 1, 0], "logprobs": [0, 0, -1, 0]},
            {"node_ids": ["b", "c", "c"], "input_ids": [1, 2, 3], "loss_mask": [0, 0, 1], "logprobs": [0, 0, -1]},
        ],
    }


def _raw_surrogates(where: str) -> bytes:
    """A record with a surrogate written as raw UTF-8 bytes (ED A0 80): orjson refuses the line."""
    record = good("bad", [1, 2, 3, 7], [8])
    if where == "session":
        record["session_id"] = "s1"
        text = json.dumps(record).replace('"s1"', '"s1SURR"', 1)
    elif where == "key":
        record["request"]["metadata"] = {"kSURR": 1}
        text = json.dumps(record)
    else:
        record["request"]["messages"][0]["content"] = "hello SURR world"
        text = json.dumps(record)
    return text.encode().replace(b"SURR", b"\xed\xa0\x80x\xed\xbf\xbf")


def _long_line_with_nan(size: int) -> bytes:
    """One record orjson rejects (a NaN) carrying ``size`` bytes of text: the stdlib path's cost."""
    record = good("bad", [1, 2, 3, 7], [8])
    record["request"]["messages"][0]["content"] = "x" * size
    return json.dumps(record).replace("-0.5", "NaN").encode()


def long_document(turns: int, per_turn: int = 2, session: str = "doc") -> dict:
    """A rollout document whose ``turns`` all grow one sequence: each prompt is the whole history."""
    ids = list(range(1, turns * per_turn + 1))
    out = []
    for i in range(turns):
        out.append({"node_id": f"t{i}", "n_prompt": i * per_turn + 1, "n_sampled": per_turn - 1})
    return {
        "session_id": session,
        "turns": out,
        "sequences": [{"node_ids": [f"t{i}" for i in range(turns)], "input_ids": ids,
                       "loss_mask": [1] * len(ids), "logprobs": [0.0] * len(ids)}],
    }  # fmt: skip


# --- issue 41: framework records (derived from the fixtures their real writers made) ---------------

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
HUGE_STEP = "99999999999999999999999"  # beyond 64 bits, as TRL writes a step (a string)


def _fixture_line(relative: str, index: int = 0) -> dict:
    path = FRAMEWORKS / relative
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    return json.loads(text.splitlines()[index])


def verifiers_episode() -> dict:
    return _fixture_line("verifiers/rollouts/step_3/train/default/traces.jsonl")


def nemo_row() -> dict:
    return _fixture_line("nemo-rl/logs/exp_001/train_data_step1.jsonl")


def otel_export() -> dict:
    return _fixture_line("otel/traces.json")


def _otel_spans(record: dict) -> list[dict]:
    return record["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _otel_with(mutate: Callable[[list[dict]], None]) -> dict:
    record = otel_export()
    mutate(_otel_spans(record))
    return record


def _nan_start(spans: list[dict]) -> None:
    spans[1]["startTimeUnixNano"] = "NaN"
    spans[2]["endTimeUnixNano"] = "1" * 5000  # int() refuses 4,300 digits


def _conversation(value: dict) -> Callable[[list[dict]], None]:
    def mutate(spans: list[dict]) -> None:
        for span in spans:
            for attribute in span.get("attributes", []):
                if attribute["key"] == "gen_ai.conversation.id":
                    attribute["value"] = value

    return mutate


def _verifiers_with(mutate: Callable[[dict], None]) -> dict:
    record = verifiers_episode()
    mutate(record)
    return record


def _verifiers_malformed(record: dict) -> None:
    nodes = record["traces"][0]["nodes"]
    nodes[1]["parent"] = "0"  # text, not an index
    nodes[3]["message"] = 5
    nodes[2]["advantages"] = [0.5]  # one value for two sampled tokens
    record["traces"][0]["rewards"] = {"correct": {"score": "high"}}


def _verifiers_cycle(record: dict) -> None:
    nodes = record["traces"][0]["nodes"]
    nodes[0]["parent"] = 4  # 0 -> 4 -> 3 -> 2 -> 1 -> 0


def verifiers_chain(n: int, tokens: int = 3) -> dict:
    """One verifiers trace of ``n`` nodes in a chain, every other one sampled: a path of n nodes
    whose sampled calls' prompts expand quadratically (issue 41 item 5: 4,000 nodes took 873 MB)."""
    nodes = []
    for i in range(n):
        sampled = i % 2 == 1
        node = {
            "message": {"role": "assistant" if sampled else "user", "content": f"message {i} " * 5},
            "sampled": sampled,
            "token_ids": [10 + (i * 7 + k) % 1000 for k in range(tokens)],
            "mask": [False] + [sampled] * (tokens - 1),
            "logprobs": [-0.5] * (tokens - 1) if sampled else [],
        }
        if i:
            node["parent"] = i - 1
        nodes.append(node)
    return {"id": "chain", "nodes": nodes, "rewards": {"c": {"score": 1.0, "weight": 1.0}}}


def _nemo_malformed(row: dict) -> None:
    row.update(input_lengths="7", rewards="high", generation_logprobs=[-0.1], idx=[1, 2])


def cases() -> list[Case]:
    """Every hostile case."""
    big = 2**70
    return [
        Case("broken_first_line", lambda p: p.write_bytes(b'{"request": {"messages": [\n' + jsonl([BEFORE, AFTER])),
             skipped="not JSON"),
        Case("one_line_array", lambda p: p.write_bytes(json.dumps([BEFORE, AFTER]).encode())),
        Case("pretty_printed_array", lambda p: p.write_bytes(json.dumps([BEFORE, AFTER], indent=2).encode()),
             suffix=".json"),
        Case("prompt_ids_2d", _around(_bad(_set("response.prompt_token_ids", [[1, 2], [3]]))),
             loads=(*NEIGHBOURS, "bad"), finding="malformed_field"),
        Case("prompt_ids_2d_even", _around(_bad(_set("response.prompt_token_ids", [[1, 2], [3, 4]]))),
             loads=(*NEIGHBOURS, "bad"), finding="malformed_field"),
        Case("prompt_id_beyond_64_bits", _around(_bad(_set("response.prompt_token_ids", [1, big, 3]))),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_token_id"),
        Case("logprob_entry_id_beyond_64_bits",
             _around(_bad(_set("response.choices.0.logprobs.content.0.token", f"token_id:{big}"))),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_token_id"),
        Case("top_k_id_beyond_64_bits",
             _around(_bad(_set("response.choices.0.logprobs.content.0.top_logprobs.0.token", big))),
             loads=(*NEIGHBOURS, "bad")),
        Case("int_token_beyond_64_bits",
             _around(_bad(_set("response.choices.0.logprobs.content.0.token", big))),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_token_id"),
        Case("logprob_400_digits",
             _around(_bad(_set("response.choices.0.logprobs.content.0.logprob", -(10**400)))),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_logprob"),
        Case("nested_2000_deep", _around(_deep(2000)), skipped="nested deeper"),
        Case("nested_over_max_depth_with_nan", _around(_deep(100)[:-1] + ', "x": NaN}'), skipped="nested deeper",
             flags=["--max-depth", "50"]),
        Case("lone_surrogate_session",
             _around(json.dumps(good("bad", [1, 2, 3, 7], [8])).replace('"s1"', '"s\\ud800x"')),
             loads=NEIGHBOURS),
        Case("raw_surrogate_bytes_in_content", _around(_raw_surrogates("content")), loads=(*NEIGHBOURS, "bad")),
        Case("raw_surrogate_bytes_in_key", _around(_raw_surrogates("key")), loads=(*NEIGHBOURS, "bad")),
        Case("raw_surrogate_bytes_in_session", _around(_raw_surrogates("session")), loads=NEIGHBOURS),
        Case("duplicate_session_key",
             _around(json.dumps(good("bad", [1, 2, 3, 7], [8]))[:-1] + ', "session_id": "elsewhere"}'),
             skipped="duplicate key 'session_id'"),
        Case("list_valued_session_id", _around(_bad(_set("session_id", ["s1", "s2"]))), skipped="is a list, not text"),
        Case("object_valued_metadata_session_id",
             _around(_bad(lambda r: (r.pop("session_id"), r.update(metadata={"session_id": {"a": 1}})))),
             skipped="metadata.session_id is a dict"),
        Case("control_characters_in_ids",
             _around(_bad(_set("session_id", "s\x1b]0;owned\x07"))), loads=NEIGHBOURS),
        Case("stream_tool_index_string", _around(_stream(_tool_delta("0"))), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field"),
        Case("stream_tool_index_negative", _around(_stream(_tool_delta(-1))), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field"),
        Case("stream_tool_index_huge", _around(_stream(_tool_delta(100_000_000))), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field", bomb=True),
        Case("stream_tool_name_int", _around(_stream(_tool_delta(0, name=5))), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field"),
        Case("stream_choices_int", _around(_stream(_choices_int)), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field"),
        Case("stream_without_finish_or_done", _around(_stream(_cut_stream)), loads=(*NEIGHBOURS, "bad"),
             finding="malformed_field"),
        Case("completions_top_logprobs_int",
             _around(_bad(_set("response.choices.0.logprobs.top_logprobs", 3),
                          completions(Turn("bad", [1, 2, 3, 7], [8])))),
             loads=(*NEIGHBOURS, "bad"), finding="malformed_field"),
        Case("completions_token_id_beyond_64_bits",
             _around(_bad(_set("response.choices.0.logprobs.tokens", [f"token_id:{big}"]),
                          completions(Turn("bad", [1, 2, 3, 7], [8])))),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_token_id"),
        Case("duplicate_id_collision",
             lambda p: p.write_bytes(jsonl([BEFORE, good("x", [1], [2]), good("x~duplicate_id_collision.jsonl:4", [1], [4]),
                                            good("x", [1], [3]), AFTER])),
             loads=(*NEIGHBOURS, "x"), finding="duplicate_node_id"),
        Case("nan_and_infinity", _around(json.dumps(good("bad", [1, 2, 3, 7], [8])).replace("-0.5", "NaN")),
             loads=(*NEIGHBOURS, "bad"), finding="invalid_logprob"),
        Case("invalid_utf8", _around(b'{"call_id": "bad", "x": "\xff\xfe"}'), skipped="not JSON"),
        Case("utf8_bom", lambda p: p.write_bytes(b"\xef\xbb\xbf" + jsonl([BEFORE, AFTER])), loads=("after",)),
        Case("crlf_lines", lambda p: p.write_bytes(jsonl([BEFORE, AFTER]).replace(b"\n", b"\r\n"))),
        Case("nul_bytes_line", _around(b"\x00" * 1000), skipped="not JSON"),
        Case("blank_noise", lambda p: p.write_bytes(b"\n \t\r\n" * 50_000 + jsonl([BEFORE]) + b"\n" * 100_000
                                                    + jsonl([AFTER]) + b"   \n" * 1000)),
        Case("not_an_object", _around("[1, 2, 3]"), skipped="a JSON list"),
        Case("pending_last_line", lambda p: p.write_bytes(jsonl([BEFORE, AFTER]) + b'{"call_id": "half', ),
             pending=1),
        Case("line_over_max_line_bytes", _around(json.dumps(good("bad", list(range(5000)), [8]))),
             skipped="longer than", flags=["--max-line-bytes", "20K"]),
        Case("ids_over_max_ids", _around(good("bad", list(range(3000)), [8])), skipped="max_ids",
             flags=["--max-ids", "1000"]),
        Case("corrupt_gzip", _write_bytes(_corrupt_gzip), suffix=".jsonl.gz", loads=("before",),
             skipped="gzip"),
        Case("truncated_gzip", _write_bytes(_truncated(_gzip)), suffix=".jsonl.gz", loads=("before",),
             skipped="truncated"),
        Case("truncated_zstd", _write_bytes(_truncated(_zstd)), suffix=".jsonl.zst", loads=("before", "g0"),
             skipped="truncated"),
        Case("zstd_skippable_frame_first", _write_bytes(_pzstd_like), suffix=".jsonl.zst",
             loads=(*NEIGHBOURS, "g0", "g499")),
        Case("corrupt_zstd", _write_bytes(_corrupt_zstd), suffix=".jsonl.zst", loads=("before",), skipped="zstd"),
        Case("document_parent_cycle", lambda p: p.write_bytes(jsonl([BEFORE, _document_with_cycle(), AFTER])),
             loads=(*NEIGHBOURS, "a", "b", "c"), finding="document_invalid_parent"),
        Case("document_turn_past_its_sequence",
             lambda p: p.write_bytes(jsonl([BEFORE, {**long_document(3), "turns": [
                 {"node_id": "t0", "n_prompt": 10**12, "n_sampled": 1}]}, AFTER])),
             loads=(*NEIGHBOURS, "t0"), finding="malformed_field"),
        Case("document_over_max_expanded_ids", lambda p: p.write_bytes(jsonl([BEFORE, long_document(400), AFTER])),
             skipped="max_expanded_ids", flags=["--max-expanded-ids", "100K"]),
        # Bombs: written small, limits lowered to prove each one holds.
        Case("document_20000_turns", _write_bytes(lambda: _gzip(jsonl([BEFORE, long_document(20_000), AFTER]))),
             suffix=".jsonl.gz", skipped="max_expanded_ids", bomb=True),
        Case("document_6000_turns_loads_as_views",
             _write_bytes(lambda: _gzip(jsonl([BEFORE, long_document(6000), AFTER]))),
             suffix=".jsonl.gz", loads=(*NEIGHBOURS, "t0", "t5999"), bomb=True),
        Case("gzip_zeros_bomb", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"0" * (64 << 20) + b"\n" + jsonl([AFTER]))),
             suffix=".jsonl.gz", skipped="longer than", flags=["--max-line-bytes", "1M"], bomb=True),
        Case("gzip_over_max_file_bytes", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"\x00" * (64 << 20))),
             suffix=".jsonl.gz", loads=("before",), skipped="max_file_bytes",
             flags=["--max-file-bytes", "16M", "--max-line-bytes", "1M"], bomb=True),
        Case("zstd_over_max_file_bytes", _write_bytes(lambda: _zstd(jsonl([BEFORE]) + b"\x00" * (64 << 20))),
             suffix=".jsonl.zst", loads=("before",), skipped="max_file_bytes",
             flags=["--max-file-bytes", "16M", "--max-line-bytes", "1M"], bomb=True),
        Case("long_line_with_nan", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + _long_line_with_nan(48 << 20) + b"\n"
                                                             + jsonl([AFTER]))),
             suffix=".jsonl.gz", loads=(*NEIGHBOURS, "bad"), bomb=True),
        Case("gzip_blank_lines_bomb", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"\n" * (128 << 20) + jsonl([AFTER]))),
             suffix=".jsonl.gz", bomb=True),
        # issue 41: steps beyond 64 bits load, placed on no step, with a warning
        Case("verifiers_step_beyond_64_bits", _around({**verifiers_episode(), "step": 10**23}),
             loads=(*NEIGHBOURS, "n2", "n4"), finding="malformed_field"),
        Case("nemo_rl_string_step_beyond_64_bits", _around({**nemo_row(), "step": HUGE_STEP}),
             loads=(*NEIGHBOURS, "c0"), finding="malformed_field"),
        Case("trl_string_step_beyond_64_bits",
             _around({"step": HUGE_STEP, "prompt": "What is 2+2?", "completion": "4", "advantage": 0.5}),
             loads=NEIGHBOURS, finding="malformed_field"),
        Case("trl_step_of_5000_digits",
             _around({"step": "9" * 5000, "prompt": "What is 2+2?", "completion": "4", "advantage": 0.5}),
             loads=NEIGHBOURS, finding="malformed_field"),
        Case("trl_step_superscript_digit",
             _around({"step": "\u00b2", "prompt": "What is 2+2?", "completion": "4", "advantage": 0.5}),
             loads=NEIGHBOURS),
        # OTel: one bad span time costs nothing but itself; a list-valued conversation id
        Case("otel_span_start_nan", _around(_otel_with(_nan_start)), loads=(*NEIGHBOURS, "c1", "c2"),
             finding="malformed_field"),
        Case("otel_conversation_id_list_of_one",
             _around(_otel_with(_conversation({"arrayValue": {"values": [{"stringValue": "x"}]}}))),
             loads=(*NEIGHBOURS, "c1", "c2")),
        Case("otel_conversation_id_list_of_two",
             _around(_otel_with(_conversation({"arrayValue": {"values": [{"stringValue": "x"}, {"intValue": "2"}]}}))),
             loads=(*NEIGHBOURS, "c1", "c2"), finding="malformed_field"),
        Case("otel_conversation_id_bool", _around(_otel_with(_conversation({"boolValue": True}))),
             loads=(*NEIGHBOURS, "c1", "c2"), finding="malformed_field"),
        # malformed framework fields degrade the record with the documented warning
        Case("verifiers_malformed_fields", _around(_verifiers_with(_verifiers_malformed)),
             loads=(*NEIGHBOURS, "n2", "n4"), finding="malformed_field"),
        Case("verifiers_parent_cycle", _around(_verifiers_with(_verifiers_cycle)),
             loads=(*NEIGHBOURS, "n2", "n4"), finding="malformed_field"),
        Case("nemo_rl_malformed_fields", _around(_bad(_nemo_malformed, nemo_row())),
             loads=(*NEIGHBOURS, "c0"), finding="malformed_field"),
        Case("verifiers_chain_over_max_expanded_ids", _around(verifiers_chain(400)), skipped="max_expanded_ids",
             flags=["--max-expanded-ids", "50K"]),
        Case("verifiers_chain_4000_nodes", _write_bytes(lambda: jsonl([BEFORE, verifiers_chain(4000), AFTER])),
             loads=(*NEIGHBOURS, "n1", "n3999"), bomb=True),
    ]  # fmt: skip


def write_all(folder: Path) -> dict[str, Path]:
    """Write every case to ``folder``; returns case name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for case in cases():
        path = folder / f"{case.name}{case.suffix}"
        case.write(path)
        paths[case.name] = path
    return paths


if __name__ == "__main__":
    for name, path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "hostile")).items():
        print(f"{name}: {path}")
