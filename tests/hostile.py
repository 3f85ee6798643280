"""A corpus of malformed and hostile trace files, each with good records around the bad one.

``python -m tests.hostile OUT_DIR`` writes every case to a folder (to try the CLI by hand);
tests/test_hostile.py runs each through inspect, export, explain and audit. A case names what
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

from tests.builders import Turn, chat_stream, completions, jsonl, vllm_chat

SESSION = "s1"


def good(call_id: str, prompt: list[int], sampled: list[int]) -> dict:
    """A plain, valid vLLM chat record."""
    return vllm_chat(Turn(call_id, prompt, sampled))


# Markup a trace may carry in its ids, file names and texts: none of it may become live on a page
# (tests/test_escape.py, tests/test_browser_hostile.py). 203.0.113.0/24 is TEST-NET-3: never routed.
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
        Case("corrupt_zstd", _write_bytes(_corrupt_zstd), suffix=".jsonl.zst", loads=("before",), skipped="zstd"),
        Case("document_parent_cycle", lambda p: p.write_bytes(jsonl([BEFORE, _document_with_cycle(), AFTER])),
             loads=(*NEIGHBOURS, "a", "b", "c"), finding="document_invalid_parent"),
        # Bombs: written small, limits lowered to prove each one holds.
        Case("gzip_zeros_bomb", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"0" * (64 << 20) + b"\n" + jsonl([AFTER]))),
             suffix=".jsonl.gz", skipped="longer than", flags=["--max-line-bytes", "1M"], bomb=True),
        Case("gzip_over_max_file_bytes", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"\x00" * (64 << 20))),
             suffix=".jsonl.gz", loads=("before",), skipped="max_file_bytes",
             flags=["--max-file-bytes", "16M", "--max-line-bytes", "1M"], bomb=True),
        Case("zstd_over_max_file_bytes", _write_bytes(lambda: _zstd(jsonl([BEFORE]) + b"\x00" * (64 << 20))),
             suffix=".jsonl.zst", loads=("before",), skipped="max_file_bytes",
             flags=["--max-file-bytes", "16M", "--max-line-bytes", "1M"], bomb=True),
        Case("gzip_blank_lines_bomb", _write_bytes(lambda: _gzip(jsonl([BEFORE]) + b"\n" * (128 << 20) + jsonl([AFTER]))),
             suffix=".jsonl.gz", bomb=True),
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
