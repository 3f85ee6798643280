"""What the agent did, conversation by conversation: a rollout as a story a person reads.

Entry points:

- ``outline(rollout) -> Story``: the conversations (one per root, in the order they matter: the
  agent's, then subagents, then side calls and other auxiliary calls), each one's calls in the
  order the conversation went (at a fork, the call that continued; discarded attempts and other
  branches folded as one ``Aside`` line that says what they were), and the break that started each
  conversation after the first (the near-miss analysis' one sentence and its evidence). Cheap: a
  walk of the topology, no message is read (about 20 ms at 5,000 calls, docs/user-guide.md).
- ``chapter(rollout, i, decoder=None) -> Chapter``: one call's part of the story, built when it is
  shown: the messages new since its parent as readable ``Block``s (system prompt, instructions and
  long tool output marked to fold, with their sizes; tool calls with their arguments pretty-printed)
  and its reply.
- ``Story.page_of(index)`` / ``Story.where(index)``: where a call is told, for the link from the
  graph to the story; ``main_row(rollout)``: the agent's own row a comparison aligns (never a
  subagent's).

Where it sits: an analysis (graph/analysis/); it reads the exact topology, the roles, and the
near misses the pipeline attached (graph/analysis/near_miss.py, never changed here). The app's
story panel and the HTML bundle (graph/reports/bundle.py) draw it; both escape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.near_miss import describe
from rollout_graph.core.messages import canonical, display_text, pretty_arguments
from rollout_graph.core.records import FATAL, WARN, Call
from rollout_graph.core.roles import main_sequence
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import Sequence as CoreSequence
from rollout_graph.core.types import (
    AGENT,
    AUXILIARY,
    COMPACTION,
    DISCARDED,
    NEW_CONVERSATION,
    REJECTED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SUBAGENT,
)

__all__ = [
    "AGENT_WORK", "PAGE_SIZE", "SIDE", "SUB", "Aside", "Block", "Break", "Chapter", "Conversation", "Story",
    "ToolCall", "chapter", "main_row", "outline",
]  # fmt: skip

PAGE_SIZE = 20  # calls told per page of a conversation
FOLD_CHARS = 1_200  # a message longer than this is folded (its first line and its size shown)
FOLD_LINES = 16
PEEK_CHARS = 160  # the one line a folded block shows
MAX_TEXT = 20_000  # characters of one block kept (the Raw JSON tab and the file keep all of it)

# what a conversation is, in the order conversations are told
AGENT_WORK, SUB, SIDE, OTHER = "agent", "subagent", "side call", "other"
ORDER = {AGENT_WORK: 0, SUB: 1, SIDE: 2, OTHER: 3}
# the words a conversation's break is named by (the near-miss kinds, docs/semantics.md "Why a call broke")
BREAK_WORDS = {
    COMPACTION: "the history was compacted",
    RESUMED: "the conversation was resumed",
    REWRITTEN: "the model's reply was replayed rewritten",
    RETOKENIZED: "the model's reply was re-tokenized",
    REJECTED: "the harness rejected the reply and asked again",
    SUBAGENT: "a subagent started",
    SIDE_CALL: "a side call",
    NEW_CONVERSATION: "the main conversation began",
    RETRY: "the same prompt was sent again",
}


@dataclass(frozen=True, slots=True)
class Break:
    """Why a conversation began apart from the one before: the near miss of its root."""

    node: int  # the root that began it
    earlier: int  # the call it nearly continued
    kind: str
    words: str  # a few plain words for the kind ("the history was compacted")
    sentence: str  # the near-miss analysis' one sentence (near_miss.describe), its "[evidence]" tail apart:
    evidence: str  # what the kind was read from (shown on a line of its own, never twice)


@dataclass(frozen=True, slots=True)
class Aside:
    """Calls folded into one line where the story goes on without them: discarded attempts (a
    retry, a rejected reply) or another branch of a fork."""

    before: int  # the call of the story this line is told before (arrival index)
    calls: tuple[int, ...]
    text: str


@dataclass(slots=True)
class Conversation:
    """One root's conversation as the story tells it."""

    root: int
    kind: str  # AGENT_WORK, SUB, SIDE or OTHER
    title: str  # "Conversation 1 of 2 · the agent"
    calls: list[int]  # the calls told, in the order the conversation went
    asides: dict[int, list[Aside]]  # call of the story -> the lines folded before it
    opened_by: Break | None = None
    n_calls: int = 0  # every call of the root's tree (told or folded)

    @property
    def pages(self) -> int:
        """How many pages of ``PAGE_SIZE`` calls tell it."""
        return max(1, -(-len(self.calls) // PAGE_SIZE))

    def page(self, number: int) -> list[int]:
        """The calls told on page ``number`` (0-based)."""
        return self.calls[number * PAGE_SIZE : (number + 1) * PAGE_SIZE]


@dataclass(slots=True)
class Story:
    """The rollout's conversations, in the order they are told."""

    conversations: list[Conversation]
    where_told: dict[int, tuple[int, int]] = field(default_factory=dict)  # call -> (conversation, position)
    folded: dict[int, tuple[int, int]] = field(default_factory=dict)  # folded call -> (conversation, call told after)

    def where(self, index: int) -> tuple[int, int] | None:
        """(conversation, position in it) of the call, or of the call its folded line comes before."""
        if index in self.where_told:
            return self.where_told[index]
        if index in self.folded:
            conv, after = self.folded[index]
            return conv, self.where_told[after][1]
        return None

    def page_of(self, index: int) -> tuple[int, int] | None:
        """(conversation, page) that tells the call or folds it."""
        at = self.where(index)
        return None if at is None else (at[0], at[1] // PAGE_SIZE)


CONTINUING = (COMPACTION, RESUMED, REWRITTEN, RETOKENIZED, REJECTED, RETRY)  # kinds that go on an earlier conversation


def _paired_before(miss, root: int) -> bool:
    """The call a root's near miss pairs it with arrived before the root (calls are in arrival order)."""
    other = miss.other if miss.later == root else miss.earlier
    return other < root


def _conversation_kinds(rollout: Rollout) -> dict[int, str]:
    """What each root's conversation is: a subagent or a side call when its near miss says so;
    the kind of the conversation it goes on when it compacts, resumes, replays or re-sends an
    earlier one; else by the role of its calls (the agent's work, or an auxiliary call)."""
    topo = rollout.topology
    kinds: dict[int, str] = {}
    visiting: set[int] = set()

    def kind_of(root: int) -> str:
        if root in kinds:
            return kinds[root]
        visiting.add(root)
        miss = rollout.near_misses.get(root)
        found: str | None = None
        # a near miss pairs the root with the call it nearly continued; one that arrived after the
        # root cannot be what its conversation began beside, and the story goes by the root's role
        if miss is not None and miss.node == root and _paired_before(miss, root):
            if miss.kind == SUBAGENT:
                found = SUB
            elif miss.kind == SIDE_CALL:
                found = SIDE
            elif miss.kind in CONTINUING:
                other = miss.other if miss.later == root else miss.earlier
                earlier_root = topo.root_of[other]
                if earlier_root not in visiting and rollout.node_roles[earlier_root] != DISCARDED:
                    found = kind_of(earlier_root)
        if found is None:
            role = rollout.node_roles[root]
            found = AGENT_WORK if role == AGENT else SIDE if role == AUXILIARY else OTHER
        kinds[root] = found
        visiting.discard(root)
        return found

    for r in topo.roots:
        kind_of(r)
    return kinds


def _break_of(rollout: Rollout, root: int) -> Break | None:
    miss = rollout.near_misses.get(root)
    if miss is None or miss.node != root or not _paired_before(miss, root):
        return None
    earlier = miss.other if miss.later == root else miss.earlier
    sentence = describe(rollout.calls, miss)
    sentence = sentence.removesuffix(f" [{miss.evidence}]") if miss.evidence else sentence
    return Break(
        root, earlier, miss.kind, BREAK_WORDS.get(miss.kind, miss.kind.replace("_", " ")), sentence, miss.evidence,
    )  # fmt: skip


def _opening(rollout: Rollout, root: int, folded: Sequence[int]) -> Break | None:
    """The break that began the conversation at ``root``: when the root only re-sent a first attempt
    folded before it (a compaction sent again), that attempt's break is the conversation's."""
    brk = _break_of(rollout, root)
    if brk is not None and brk.kind == RETRY and brk.earlier in folded:
        return _break_of(rollout, brk.earlier) or brk
    return brk


def _aside_text(rollout: Rollout, ids: list[str], calls: Sequence[int], kept: int) -> str:
    """One line for discarded attempts before ``kept``: how many, what they were, what continued."""
    # what each was: the later call that re-sent, rejected or replaced it says (Rollout.replaced_by)
    kinds = {m.kind for m in (rollout.replaced_by.get(c) or rollout.near_misses.get(c) for c in calls) if m is not None}
    names = ", ".join(ids[c] for c in calls[:4]) + (f" and {len(calls) - 4} more" if len(calls) > 4 else "")
    n = len(calls)
    what = "attempt" if n == 1 else "attempts"
    if kinds == {RETRY}:
        why = "the same prompt sent again (a retry)"
    elif kinds == {REJECTED}:
        why = "the harness rejected the reply and asked again"
    elif kinds:
        why = "; ".join(sorted(BREAK_WORDS.get(k, k) for k in kinds))
    else:
        why = "a sibling continued instead"
    return f"{n} discarded {what} ({names}): {why}; {ids[kept]} continued"


def _branch_text(rollout: Rollout, ids: list[str], start: int, size: int) -> str:
    """One line for another branch of a fork the story does not follow (what it was, when the
    near-miss analysis says)."""
    miss = rollout.near_misses.get(start)
    what = BREAK_WORDS.get(miss.kind, miss.kind) if miss is not None and miss.node == start else "went another way"
    calls = f"{size:,} call{'s' if size != 1 else ''}"
    return f"{ids[start]}: {what} ({calls} on a branch this story does not follow)"


def outline(rollout: Rollout) -> Story:
    """The story's conversations and the calls each tells (see the module docstring)."""
    topo, n, ids = rollout.topology, len(rollout.calls), rollout.node_ids
    roots = list(topo.roots)
    # calls in each subtree, children before their parent (a child may arrive before its parent:
    # concurrent calls, a late parent adopting them), so not in arrival order
    size = [1] * n
    for i in reversed(_preorder(topo.children, roots)):
        p = topo.parents[i]
        if p is not None:
            size[p] += size[i]
    # a discarded root that another root re-sent (a retry of the first call) is folded before it
    folded_roots: dict[int, int] = {}
    for r in roots:
        # what replaced a call that looks dropped is keyed by it (Rollout.replaced_by: the later call)
        miss = rollout.replaced_by.get(r)
        if rollout.node_roles[r] == DISCARDED and miss is not None:
            other = miss.later
            if other != r and topo.parents[other] is None:
                folded_roots[r] = other
    told = [r for r in roots if r not in folded_roots]
    folded_into: dict[int, list[int]] = {}  # the root that re-sent them -> the folded roots
    for r, kept in folded_roots.items():
        folded_into.setdefault(kept, []).append(r)
    kinds = _conversation_kinds(rollout)
    ranked = sorted(told, key=lambda r: (ORDER[kinds[r]], r))
    count = {kind: sum(1 for r in ranked if kinds[r] == kind) for kind in ORDER}
    seen = dict.fromkeys(ORDER, 0)
    story = Story([])
    for k, root in enumerate(ranked):
        kind = kinds[root]
        calls: list[int] = []
        asides: dict[int, list[Aside]] = {}
        node: int | None = root
        while node is not None:
            calls.append(node)
            kids = topo.children[node]
            if not kids:
                break
            going = [c for c in kids if c not in topo.discarded]
            nxt = max(going or kids, key=lambda c: (size[c], -c))
            dropped = [c for c in kids if c in topo.discarded]
            if dropped and nxt not in topo.discarded:
                asides.setdefault(nxt, []).append(Aside(nxt, tuple(dropped), _aside_text(rollout, ids, dropped, nxt)))
            for other in going:
                if other != nxt:
                    asides.setdefault(nxt, []).append(
                        Aside(
                            nxt, tuple(_subtree(topo.children, other)), _branch_text(rollout, ids, other, size[other])
                        )
                    )
            node = nxt
        for r in folded_into.get(root, ()):
            asides.setdefault(root, []).insert(0, Aside(root, (r,), _aside_text(rollout, ids, [r], root)))
        seen[kind] += 1
        name = {AGENT_WORK: "The agent", SUB: "Subagent", SIDE: "Side call", OTHER: "Other calls"}[kind]
        if kind == AGENT_WORK:
            title = (
                "The agent's conversation"
                if count[kind] == 1
                else f"The agent · conversation {seen[kind]} of {count[kind]}"
            )
        else:
            title = name if count[kind] == 1 else f"{name} {seen[kind]} of {count[kind]}"
        conv = Conversation(
            root,
            kind,
            title,
            calls,
            asides,
            _opening(rollout, root, folded_into.get(root, ())) if k or kind != AGENT_WORK else None,
            size[root] + sum(size[r] for r in folded_into.get(root, ())),
        )
        story.conversations.append(conv)
        for pos, c in enumerate(calls):
            story.where_told[c] = (k, pos)
        for after, lines in asides.items():
            for line in lines:
                for c in line.calls:
                    story.folded.setdefault(c, (k, after))
    # calls below a folded line (a discarded attempt's own children) point at that line's call
    for i in range(n):
        if i not in story.where_told and i not in story.folded:
            j: int | None = i
            while j is not None and j not in story.where_told and j not in story.folded:
                j = topo.parents[j]
            if j is not None:
                story.folded[i] = story.folded.get(j) or (story.where_told[j][0], j)
    return story


def _preorder(children: list[list[int]], roots: list[int]) -> list[int]:
    """Every call below ``roots``, each after its parent."""
    out, stack = [], list(roots)
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(children[v])
    return out


def _subtree(children: list[list[int]], start: int) -> list[int]:
    out, stack = [], [start]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(children[v])
    return sorted(out)


def main_row(rollout: Rollout) -> CoreSequence | None:
    """The row a reader compares first: the agent row with the most trainable tokens among the rows
    of the agent's own conversations (never a subagent's, such as qwen-code's memory agent, nor a
    side call's, whatever they wrote); the library's ``main_sequence`` when the agent has no row."""
    if not rollout.sequences:
        return None
    kinds = _conversation_kinds(rollout)
    root_of = rollout.topology.root_of
    agents = [s for s in rollout.sequences if s.role == AGENT and kinds.get(root_of[s.leaf]) == AGENT_WORK]
    if not agents:
        return main_sequence(rollout.sequences)
    return max(agents, key=lambda s: (s.n_trainable, s.n_turns))


# ---- one call's chapter: its new messages and its reply, built when shown


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as a reader wants it: the tool, what it is about in one line, the arguments."""

    name: str
    peek: str
    arguments: str  # pretty-printed JSON when it is JSON


@dataclass(frozen=True, slots=True)
class Block:
    """One message (or part of the reply) of a chapter."""

    kind: str  # "system", "instructions", "user", "tool", "assistant", "reasoning", "context", "note"
    title: str  # "System prompt", "Instructions", "Tool output · bash", "Reply"
    text: str  # at most MAX_TEXT characters
    chars: int  # the whole text's length
    lines: int
    folded: bool  # shown as one line (title, peek and size) until opened
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def peek(self) -> str:
        """The first line worth reading, for a folded block."""
        for line in self.text.splitlines():
            if line.strip():
                return line.strip()[:PEEK_CHARS]
        return ""

    @property
    def size(self) -> str:
        """``16,384 characters · 310 lines``."""
        return f"{self.chars:,} characters" + (f" · {self.lines:,} lines" if self.lines > 1 else "")


@dataclass(frozen=True, slots=True)
class Chapter:
    """One call of the story: the messages it added and what the model replied."""

    index: int
    node_id: str
    new: tuple[Block, ...]  # what the harness added since the parent's reply (all, for a root)
    reply: tuple[Block, ...]
    n_prompt: int
    n_sampled: int
    finish_reason: str | None
    trained: bool
    fatal: int
    warn: int
    shared: int  # messages the call repeats from before (not told again)


_COMMAND_KEYS = ("command", "cmd", "script", "code", "commands")
_PATH_KEYS = ("file_path", "filePath", "path", "absolute_path", "filename", "file")
_QUERY_KEYS = ("pattern", "query", "url", "prompt", "description", "text", "content")


def tool_calls_of(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    """The tool calls of a message (chat-completions ``tool_calls`` or Anthropic ``tool_use``
    blocks), each with a one-line peek at what it does."""
    found: list[tuple[str, Any]] = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = call["function"] if isinstance(call.get("function"), dict) else call
            found.append((str(fn.get("name") or "?"), fn.get("arguments")))
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "tool_use":
                found.append((str(part.get("name") or "?"), part.get("input")))
    return tuple(ToolCall(name, _peek(args), pretty_arguments(args)) for name, args in found)


def _peek(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return " ".join(arguments.split())[:PEEK_CHARS]
    if isinstance(arguments, dict):
        for keys in (_COMMAND_KEYS, _PATH_KEYS, _QUERY_KEYS):
            for key in keys:
                value = arguments.get(key)
                if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    value = " ".join(value)
                if isinstance(value, str) and value.strip():
                    return " ".join(value.split())[:PEEK_CHARS]
        short = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), None)
        if short is not None:
            return " ".join(short.split())[:PEEK_CHARS]
    return ""


def _block(kind: str, title: str, text: str, fold: bool | None = None, calls: tuple[ToolCall, ...] = ()) -> Block:
    lines = text.count("\n") + 1 if text else 0
    long = len(text) > FOLD_CHARS or lines > FOLD_LINES
    return Block(kind, title, text[:MAX_TEXT], len(text), lines, long if fold is None else fold, calls)


def _tool_results(message: dict[str, Any]) -> list[str]:
    """Anthropic ``tool_result`` blocks inside a user message, as text."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [display_text(p.get("content")) for p in content if isinstance(p, dict) and p.get("type") == "tool_result"]


def message_blocks(message: dict[str, Any], first_user: bool, tool_names: dict[str, str]) -> list[Block]:
    """A request message as blocks: system prompts and the first instructions folded with their
    sizes, tool output folded when long, tool calls pretty."""
    role = str(message.get("role") or "user")
    text = display_text(message.get("content"))
    calls = tool_calls_of(message)
    if role in ("system", "developer"):
        return [_block("system", "System prompt" if role == "system" else "Developer instructions", text, True)]
    if role == "tool":
        name = tool_names.get(str(message.get("tool_call_id") or ""), str(message.get("name") or ""))
        return [_block("tool", "Tool output" + (f" · {name}" if name else ""), text)]
    if role == "user":
        results = _tool_results(message)
        if results:
            return [_block("tool", "Tool output", r) for r in results]
        if first_user:
            return [_block("instructions", "Instructions", text, True)]
        return [_block("user", "User", text)]
    if role == "assistant":
        return [_block("assistant", "Assistant (replayed)", text, None, calls)]
    return [_block("user", role.capitalize(), text)]


def reply_blocks(call: Call) -> list[Block]:
    """The call's reply: its reasoning (folded), its text, its tool calls."""
    message = call.response_message
    if message is None:
        return []
    out = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        out.append(_block("reasoning", "Thinking", reasoning, True))
    text = (
        display_text(message.get("content"))
        if not isinstance(message.get("content"), list)
        else "\n".join(
            p.get("text", "") for p in message["content"] if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    )
    calls = tool_calls_of(message)
    if text.strip() or calls:
        out.append(_block("assistant", "Reply", text, False if len(text) <= FOLD_CHARS * 4 else True, calls))
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    try:
        return canonical(a, "assistant") == canonical(b, "assistant")
    except (TypeError, ValueError, RecursionError):
        return False


def _shared(rollout: Rollout, i: int, messages: list[dict[str, Any]]) -> int:
    """How many of the call's request messages its parent had already (its messages and reply)."""
    parent = rollout.topology.parents[i]
    if parent is None:
        return 0
    before = list(rollout.calls[parent].request_messages or [])
    reply = rollout.calls[parent].response_message
    if reply is not None:
        before.append({**reply, "role": reply.get("role") or "assistant"})
    k = len(before)
    if k and k <= len(messages) and _same(before[-1], messages[k - 1]):
        return k
    shared = 0  # the prefix rewritten somewhere: as far as it agrees
    for a, b in zip(before, messages, strict=False):
        if not _same(a, b):
            break
        shared += 1
    return shared


def chapter(rollout: Rollout, i: int, decoder: Decoder | None = None) -> Chapter:
    """Call ``i``'s part of the story (see the module docstring)."""
    call = rollout.calls[i]
    messages = call.request_messages
    blocks: list[Block] = []
    shared = 0
    if messages is not None:
        shared = _shared(rollout, i, messages)
        names: dict[str, str] = {}
        for m in messages:
            for tc in m.get("tool_calls") or []:
                if isinstance(tc, dict) and tc.get("id"):
                    fn = tc["function"] if isinstance(tc.get("function"), dict) else tc
                    names[str(tc["id"])] = str(fn.get("name") or "")
        first_user = not any(m.get("role") == "user" for m in messages[:shared])
        for m in messages[shared:]:
            if not isinstance(m, dict):
                continue
            blocks += message_blocks(m, first_user and m.get("role") == "user", names)
            if m.get("role") == "user":
                first_user = False
    elif call.prompt_ids is not None:  # token ids only: the context span, decoded when a tokenizer is there
        start = rollout.context_start(i)
        span = call.prompt_ids[start:]
        text = decoder.text(span) if decoder is not None and len(span) else ""
        title = f"Context from the harness · {len(span):,} tokens"
        blocks.append(_block("context", title, text or "(no messages recorded: the Tokens tab shows the ids)", None))
    reply = reply_blocks(call)
    if not reply and call.n_sampled:
        text = decoder.text(call.sampled_ids) if decoder is not None else ""
        reply = [_block("assistant", f"Reply · {call.n_sampled:,} sampled tokens", text or "(no text recorded)")]
    levels = [f.level for f in rollout.findings_for(i)]
    return Chapter(
        i, call.node_id, tuple(blocks), tuple(reply), call.n_prompt, call.n_sampled, call.finish_reason,
        bool(rollout.trainable[i]) and i not in rollout.topology.discarded, levels.count(FATAL), levels.count(WARN),
        shared,
    )  # fmt: skip
