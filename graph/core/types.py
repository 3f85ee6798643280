"""The vocabulary of the graph, as ``Literal`` types (one name per concept; see docs/semantics.md).

- A **call** (also "node" in the graph, "turn" in the JSON contract's counts) is one model call.
- ``Level``: how serious a finding is.
- ``Role``: what a training sequence (and a call on it) is for.
- ``Kind``: where a call sits in the graph.
- ``LinkedBy``: what linked a call to its parent.
- ``NearMissKind``: why a call did not continue the earlier call it nearly continued
  (rollout_graph.analysis.near_miss decides it).
"""

from __future__ import annotations

from typing import Literal

Level = Literal["FATAL", "WARN", "INFO"]
Role = Literal["agent", "auxiliary", "discarded"]
Kind = Literal["root", "fork", "leaf", "inner"]
LinkedBy = Literal["tokens", "messages", "document"]

# Each constant is defined here once; the modules that use them import them from here.
FATAL: Level = "FATAL"
WARN: Level = "WARN"
INFO: Level = "INFO"
LEVELS: tuple[Level, ...] = (FATAL, WARN, INFO)

AGENT: Role = "agent"
AUXILIARY: Role = "auxiliary"
DISCARDED: Role = "discarded"
ROLES: tuple[Role, ...] = (AGENT, AUXILIARY, DISCARDED)

BY_TOKENS: LinkedBy = "tokens"
BY_MESSAGES: LinkedBy = "messages"
BY_DOCUMENT: LinkedBy = "document"

ROOT: Kind = "root"
FORK: Kind = "fork"
LEAF: Kind = "leaf"
INNER: Kind = "inner"
KINDS: tuple[Kind, ...] = (ROOT, FORK, LEAF, INNER)

# Near-miss kinds (the decision table: docs/semantics.md, "Why a call broke").
NearMissKind = Literal[
    "parallel_sample",
    "retry",
    "retokenized",
    "rewritten_continuation",
    "rejected",
    "resumed",
    "compaction",
    "subagent",
    "side_call",
    "new_conversation",
    "unknown",
]
PARALLEL_SAMPLE: NearMissKind = "parallel_sample"  # another choice of the same request (n > 1)
RETRY: NearMissKind = "retry"
RETOKENIZED: NearMissKind = "retokenized"
REWRITTEN: NearMissKind = "rewritten_continuation"
REJECTED: NearMissKind = "rejected"  # the harness dropped the reply and asked again (a format error)
RESUMED: NearMissKind = "resumed"
COMPACTION: NearMissKind = "compaction"
SUBAGENT: NearMissKind = "subagent"
SIDE_CALL: NearMissKind = "side_call"
NEW_CONVERSATION: NearMissKind = "new_conversation"
UNKNOWN: NearMissKind = "unknown"  # too little evidence to name the cause
NEAR_MISS_KINDS: tuple[NearMissKind, ...] = (
    PARALLEL_SAMPLE,
    RETRY,
    RETOKENIZED,
    REWRITTEN,
    REJECTED,
    COMPACTION,
    RESUMED,
    NEW_CONVERSATION,
    SUBAGENT,
    SIDE_CALL,
    UNKNOWN,
)
# A replay of the model's own turn that broke the token prefix: the harness should have continued it.
BROKEN_REPLAYS = (RETOKENIZED, REWRITTEN)
# A conversation of its own: nothing was meant to continue.
NEW_CONVERSATIONS = (NEW_CONVERSATION, SUBAGENT, SIDE_CALL)
# The decision-table row of a subagent whose spawning tool call's arguments are its prompt: the two
# calls are one piece of work handed on, never attempts the harness gave up on (docs/semantics.md).
SPAWNED = "spawned"
REPLY_CARRIED = "reply_carried"  # a near-miss fact: the later call carries the earlier reply (a resume)
