"""``benchmarks/synthetic.py --logprob-shape vllm-0.32`` writes what a real vLLM 0.32 writes
(tests/fixtures/writers/vllm/): the same keys at every level of a chat response, logprob entries
with ``bytes`` (the sampled token's text), alternatives spelling ``token_id:N`` with ``bytes``
of that spelling, the sampled token first among them; and the loader reads it alike."""

from __future__ import annotations

import json

import orjson

from benchmarks.synthetic import generate
from rollout_graph.ingest.load.files import load_paths
from tests.conformance.writers import FIXTURES


def real_chat() -> dict:
    (path,) = (FIXTURES / "vllm" / "processed_logprobs").glob("capture-*.jsonl")
    return next(
        r for r in map(json.loads, path.read_text().splitlines()) if r["dialect"] == "chat" and not r.get("stream")
    )


def synthetic_chat(shape: str = "vllm-0.32") -> dict:
    w = generate(6, seed=1, logprob_shape=shape)
    return next(r for r in map(orjson.loads, w.records) if "response" in r)


def test_the_vllm_shape_has_the_real_engines_keys_in_its_order():
    real, ours = real_chat()["response"], synthetic_chat()["response"]
    assert list(ours) == list(real)
    assert list(ours["choices"][0]) == list(real["choices"][0])
    assert list(ours["choices"][0]["message"]) == list(real["choices"][0]["message"])
    assert list(ours["usage"]) == list(real["usage"])
    entry, real_entry = ours["choices"][0]["logprobs"]["content"][0], real["choices"][0]["logprobs"]["content"][0]
    assert list(entry) == list(real_entry) and list(entry["top_logprobs"][0]) == list(real_entry["top_logprobs"][0])


def test_bytes_are_the_tokens_text_and_the_alternatives_spell_token_id():
    for response in (real_chat()["response"], synthetic_chat()["response"]):
        for entry in response["choices"][0]["logprobs"]["content"]:
            first = entry["top_logprobs"][0]
            assert first["token"] == entry["token"] and first["logprob"] == entry["logprob"]  # the sampled one first
            for alt in entry["top_logprobs"]:
                assert bytes(alt["bytes"]).decode() == alt["token"]  # the spelling's bytes
            assert bytes(entry["bytes"]).decode() != entry["token"]  # the text's bytes, not the spelling's
    assert "bytes" not in synthetic_chat("plain")["response"]["choices"][0]["logprobs"]["content"][0]


def test_the_loader_reads_the_synthetic_vllm_shape_as_the_plain_one(tmp_path):
    for shape in ("plain", "vllm-0.32"):
        w = generate(40, seed=3, logprob_shape=shape)
        (tmp_path / f"{shape}.jsonl").write_bytes(b"\n".join(w.records) + b"\n")
    plain = load_paths([tmp_path / "plain.jsonl"]).sessions["synthetic"].calls
    vllm = load_paths([tmp_path / "vllm-0.32.jsonl"]).sessions["synthetic"].calls
    assert [c.prompt_ids.tolist() for c in plain] == [c.prompt_ids.tolist() for c in vllm]
    assert [c.sampled_logprobs.tolist() for c in plain] == [c.sampled_logprobs.tolist() for c in vllm]
