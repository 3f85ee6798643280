"""Near misses: why a call did not continue the earlier call it nearly continued.

Exact prefix linking is right for training data, but harnesses rewrite history before replaying it
(a stop string cut, reasoning dropped, tool-call JSON re-serialised, the model's text re-tokenized,
a history compacted or resumed), and then a step becomes a new root or makes the previous step look
like a discarded retry. This package explains such breaks without changing the exact graph, its
sequences or exports; it is the one classifier: ``inspect``, ``explain``, ``tail``, the app and the
JSON contract all read its kinds (docs/semantics.md, "Near misses" and "Why a call broke").

Causality: a call's near miss always names a call that arrived before it. Which LATER call
replaced, re-sent or replayed a call that looks dropped is the other direction, kept apart
(:func:`replacements`, ``Rollout.replaced_by``).

The package, by job:

- ``ids``: token ids (shared prefixes, replay alignment, the sorted-ends and same-prompt searches);
- ``texts``: messages (system text, tools, turns aligned, pasted history, spawning arguments);
- ``evidence``: the facts one pair of calls shows, read when asked (:class:`Pair`);
- ``decision``: the table from facts to a kind (:func:`decide`);
- ``search``: the pass (:func:`near_misses`, :func:`replacements`, both on one set-up:
  :func:`near_misses_and_replacements`; :func:`text_replays`);
- ``words``: the sentence (:func:`describe`), the JSON objects and the findings.
"""

from __future__ import annotations

from rollout_graph.analysis.near_miss.decision import Decision, decide
from rollout_graph.analysis.near_miss.evidence import Pair
from rollout_graph.analysis.near_miss.ids import (  # noqa: F401 (the C helpers' tests)
    Alignment,
    _breaks_inside_reply,
    _first_difference,
    align,
    common_prefix,
    end_ids,
    prompt_of,
    replay_alignment,
    same_text,
)
from rollout_graph.analysis.near_miss.search import (
    REPLACING,
    near_misses,
    near_misses_and_replacements,
    replacements,
    replay_chains,
    replayed,
    text_replays,
)
from rollout_graph.analysis.near_miss.texts import (  # noqa: F401 (the C helpers' tests compare these)
    SIMILAR_SYSTEM,
    SYSTEM_COMPARED,
    _similar,
    _SystemGrams,
    system_text,
    tool_names,
)
from rollout_graph.analysis.near_miss.words import (
    LABELS,
    describe,
    dropped_words,
    near_miss_json,
    replaced_json,
    retokenized_finding,
    rewrite_finding,
)
from rollout_graph.core.records import NearMiss
from rollout_graph.core.types import (
    BROKEN_REPLAYS,
    COMPACTION,
    NEAR_MISS_KINDS,
    NEW_CONVERSATION,
    NEW_CONVERSATIONS,
    PARALLEL_SAMPLE,
    REJECTED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SPAWNED,
    SUBAGENT,
    UNKNOWN,
)

KINDS = NEAR_MISS_KINDS

__all__ = [
    "BROKEN_REPLAYS", "COMPACTION", "KINDS", "LABELS", "NEW_CONVERSATION", "NEW_CONVERSATIONS", "PARALLEL_SAMPLE",
    "REJECTED", "REPLACING", "RESUMED", "RETOKENIZED", "RETRY", "REWRITTEN", "SIDE_CALL", "SPAWNED", "SUBAGENT",
    "UNKNOWN", "Alignment", "Decision", "NearMiss", "Pair", "align", "common_prefix", "decide", "describe",
    "dropped_words", "end_ids", "near_miss_json", "near_misses", "near_misses_and_replacements", "prompt_of", "replaced_json", "replacements",
    "replay_alignment", "replay_chains", "replayed", "retokenized_finding", "rewrite_finding", "same_text",
    "system_text", "text_replays", "tool_names",
]  # fmt: skip
