"""Build a Hugging Face ``tokenizer.json`` (+ ``tokenizer_config.json``) from a GGUF file's
metadata, offline. Used for the bundled SmolLM2 tokenizer; works for byte-level BPE ("gpt2")
GGUF tokenizers.

``python tools/extract_tokenizer.py MODEL.gguf OUT_DIR``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL = 3  # llama.cpp token type for special/control tokens
USER_DEFINED = 4


def _field(reader: GGUFReader, key: str):
    field = reader.fields.get(key)
    if field is None:
        return None
    kind = field.types[0].name
    if kind == "STRING":
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    if kind == "ARRAY":
        if field.types[1].name == "STRING":
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    return field.parts[field.data[0]].tolist()[0]


def build(gguf_path: Path, name: str | None = None) -> tuple[Tokenizer, dict]:
    reader = GGUFReader(str(gguf_path))
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise SystemExit("only byte-level BPE (tokenizer.ggml.model == gpt2) is supported")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    # SmolLM2 ("smollm" pre-tokenizer): digits one by one, then GPT-2 byte-level splitting.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [tokens[i] for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
    tokenizer.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    name = name or _field(reader, "general.basename") or gguf_path.stem

    def token(key: str) -> str | None:
        i = _field(reader, key)
        return None if i is None else tokens[i]

    config = {
        "name_or_path": name,
        "source": f"extracted from {gguf_path.name} by tools/extract_tokenizer.py",
        "bos_token": token("tokenizer.ggml.bos_token_id"),
        "eos_token": token("tokenizer.ggml.eos_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"),
        "pad_token": token("tokenizer.ggml.padding_token_id"),
        "add_bos_token": bool(_field(reader, "tokenizer.ggml.add_bos_token")),
        "chat_template": _field(reader, "tokenizer.chat_template"),
    }
    return tokenizer, config


def write(gguf_path: Path, out_dir: Path, name: str | None = None) -> Path:
    tokenizer, config = build(gguf_path, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out_dir / "tokenizer.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--name", help="the model's name (default: the GGUF's general.basename)")
    args = parser.parse_args()
    print(write(args.gguf, args.out_dir, args.name))


if __name__ == "__main__":
    main()
