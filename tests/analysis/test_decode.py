"""Offline decoding with the bundled tokenizer, and the tokenizer resolution order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from rollout_graph.analysis import decode
from rollout_graph.analysis.decode import (
    BESIDE_TRACE,
    BUNDLED,
    HF_CACHE,
    RAW_IDS,
    TRACE_TEXT,
    USER,
    TokenizerDecoder,
    decoder_for,
    find_tokenizer,
)
from tests.support.builders import Turn, examples, rollout_of, vllm_chat

BUNDLED_DIR = decode.SAMPLES / "SmolLM2-135M-Instruct"
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def hf() -> Tokenizer:
    return Tokenizer.from_file(str(BUNDLED_DIR / "tokenizer.json"))


@pytest.fixture(scope="module")
def bundled() -> TokenizerDecoder:
    return TokenizerDecoder(BUNDLED_DIR / "tokenizer.json", BUNDLED)


def test_multibyte_characters_appear_once_without_mojibake(hf, bundled):
    text = "<|im_start|>user\nprix: 12€ ✓ 你好 naïve 🚀<|im_end|>\n"
    ids = hf.encode(text).ids
    pieces = bundled.pieces(ids)
    assert "".join(pieces) == text
    assert not any("\ufffd" in p for p in pieces)
    assert sum(p.count("€") for p in pieces) == 1 and sum(p.count("🚀") for p in pieces) == 1
    assert len(pieces) == len(ids)
    # the rocket needs several byte-level tokens: the earlier ones are empty, the last carries it
    rocket = next(i for i, p in enumerate(pieces) if "🚀" in p)
    assert pieces[rocket - 1] == ""


def test_special_tokens_stay_visible(hf, bundled):
    ids = hf.encode("<|im_start|>assistant\nok<|im_end|>").ids
    pieces = bundled.pieces(ids)
    assert pieces[0] == "<|im_start|>" and pieces[-1] == "<|im_end|>"
    assert bundled.is_special(ids[0]) and not bundled.is_special(ids[2])


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(
        alphabet=st.characters(whitelist_categories=("L", "M", "N", "P", "S", "Zs"), whitelist_characters="\n\t"),
        max_size=60,
    )
)
def test_round_trip_matches_the_reference_tokenizer(hf, bundled, text):
    ids = hf.encode(text).ids
    reference = hf.decode(ids, skip_special_tokens=False)
    assert bundled.text(ids) == reference
    if "\ufffd" not in reference:  # bytes the vocabulary lacks (unassigned planes) cannot round-trip
        assert reference == text


def test_invalid_bytes_and_unknown_ids_degrade_visibly(bundled, hf):
    lone = hf.encode("🚀").ids[:1]  # the first piece of a four-byte character, alone
    assert bundled.pieces(lone) == ["\ufffd"]
    assert bundled.pieces([10**9]) == ["<1000000000>"]


def trace_dir(tmp_path: Path, model: str = MODEL) -> Path:
    path = tmp_path / "run" / "trace.jsonl"
    path.parent.mkdir()
    record = vllm_chat(Turn("c0", [1, 2], [3]))
    record["response"]["model"] = model
    path.write_text(json.dumps(record) + "\n")
    return path


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setattr(decode, "_hub_tokenizer", lambda model: pytest.fail("no network unless asked"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    trace = trace_dir(tmp_path)
    # bundled samples, matched by the model's name
    assert find_tokenizer(MODEL, [trace]).source == BUNDLED
    # a tokenizer next to the trace wins over the bundled one
    beside = trace.parent / "SmolLM2-135M-Instruct"
    shutil.copytree(BUNDLED_DIR, beside)
    assert find_tokenizer(MODEL, [trace]).source == BESIDE_TRACE
    # a path the user gives wins over everything
    assert find_tokenizer(MODEL, [trace], user_path=BUNDLED_DIR).source == USER
    with pytest.raises(FileNotFoundError):
        find_tokenizer(MODEL, [trace], user_path=tmp_path / "nothing")


def test_local_hugging_face_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(decode, "_hub_tokenizer", lambda model: pytest.fail("no network unless asked"))
    snapshot = tmp_path / "hf" / "models--acme--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    shutil.copy(BUNDLED_DIR / "tokenizer.json", snapshot)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    found = find_tokenizer("acme/tiny", [trace_dir(tmp_path, "acme/tiny")], samples=tmp_path / "no-samples")
    assert found.source == HF_CACHE


def test_hub_only_when_asked(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(decode, "_hub_tokenizer", lambda model: asked.append(model))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    assert find_tokenizer("acme/unknown", [], samples=tmp_path) is None and asked == []
    find_tokenizer("acme/unknown", [], samples=tmp_path, allow_download=True)
    assert asked == ["acme/unknown"]


def test_fallbacks_to_trace_text_then_raw_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    texts = rollout_of([vllm_chat(Turn("c0", [1, 2], [5, 6]), token_text=True)])
    for call in texts.calls:
        call.model = "acme/none"
    dec = decoder_for(texts.calls, samples=tmp_path)
    assert dec.source == TRACE_TEXT
    assert dec.pieces(np.array([5, 6, 1])) == ["tok5", "tok6", "<1>"]
    ids_only = rollout_of([vllm_chat(Turn("c0", [1, 2], [5]))])
    ids_only.calls[0].top_k = None
    assert decoder_for(ids_only.calls, samples=tmp_path).source == RAW_IDS
