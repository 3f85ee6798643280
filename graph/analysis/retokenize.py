"""Retokenization check: decode each call's prompt and encode it again with the tokenizer. Ids
that do not come back identical are the train/inference skew this whole design avoids: a trainer
that re-tokenizes text trains on a sequence the model never saw."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from rollout_graph.analysis.decode import TokenizerDecoder
from rollout_graph.core.rollout import Rollout


@dataclass(frozen=True)
class Mismatch:
    """A prompt whose recorded ids differ from re-tokenizing its messages, from the first differing position."""

    node: int
    position: int  # first differing position in the prompt
    original: list[int]  # the recorded ids from there (a window)
    reencoded: list[int]  # what re-encoding the decoded text gives from there


@lru_cache(maxsize=4)
def _encoder(path: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def retokenize(rollout: Rollout, decoder: TokenizerDecoder, window: int = 12) -> list[Mismatch]:
    """Every call whose prompt ids do not survive decode -> encode, with the first differing span."""
    encoder = _encoder(decoder.path)
    found = []
    for k, call in enumerate(rollout.calls):
        if call.prompt_ids is None or not call.n_prompt:
            continue
        again = np.asarray(encoder.encode(decoder.text(call.prompt_ids), add_special_tokens=False).ids)
        n = min(again.shape[0], call.n_prompt)
        diff = np.flatnonzero(again[:n] != call.prompt_ids[:n])
        if not diff.size and again.shape[0] == call.n_prompt:
            continue
        at = int(diff[0]) if diff.size else n
        found.append(Mismatch(k, at, call.prompt_ids[at : at + window].tolist(), again[at : at + window].tolist()))
    return found
