"""The first screen's words and numbers (pure): what the app is in one line, the open rollout's
story in three numbers, and every headline count with its one-line meaning.

Entry points: ``INTRO`` (the one line), ``story_numbers(rollout, story) -> [Number]`` (model
calls, conversations, tokens to train on: plain words first, the jargon in ``meaning``),
``numbers_html`` (them as one line, each with a (?) that shows its meaning), ``WHERE_TO_CLICK``,
``GLOSSARY`` (the words the graph uses, one line each), ``headline_tiles(rollout)`` (every count:
calls, roots, forks, retries, broken replays, trainable tokens (rows), FATAL · WARN; the glossary's
words, docs/semantics.md), ``compact(n)`` (1,234 / 12.3k / 1.89M).

Where it sits: drawn by the overview panel (views/panels/overview.py); the counts are the
rollout's own (``Rollout.stats``) and the story's (rollout_graph.analysis.story), never computed here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout_graph.analysis.story import Story
from rollout_graph.core.records import FATAL, WARN
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text

INTRO = (
    "every model call of an LLM agent, linked by the exact tokens it saw: what it did, "
    "where its context broke, what a trainer learns."
)
WHERE_TO_CLICK = (
    "Click a call in the graph (or a step of the story) to read it on the right · "
    "<b>j</b> / <b>k</b> step through the calls · <b>/</b> searches"
)
GLOSSARY = (
    ("call", "one request to the model and its reply (a node of the graph)"),
    ("conversation", "calls that extend each other's exact tokens, from one first call (a root)"),
    ("root ◆", "a call no earlier call's tokens start: it begins a conversation"),
    ("fork ■", "a call that more than one later call extends"),
    ("leaf ●", "a call nothing extends: it ends one training row"),
    ("discarded ⊗", "an attempt no row continues as trained: a sibling went on instead (a retry, when the same prompt was re-sent)"),
    ("near miss (dashed)", "a conversation that nearly continued an earlier call, and why it did not (compaction, subagent, a rewritten reply)"),
    ("trainable tokens", "tokens the model sampled that a trainer learns from (loss mask 1); (calls) counts each call once, (rows) sums the training rows"),
    ("context tokens", "tokens the harness put in the prompt (tool output, user text): loss mask 0, not learned from"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Number:
    """One of the first screen's three numbers."""

    value: str
    words: str  # plain words: "model calls"
    meaning: str  # one line behind the (?)


def story_numbers(rollout: Rollout, story: Story) -> list[Number]:
    """Model calls, conversations, tokens to train on: the rollout in three numbers."""
    s = rollout.stats
    n_conv = len(story.conversations)
    agent = sum(1 for c in story.conversations if c.kind == "agent")
    return [
        Number(f"{s['n_calls']:,}", "model call" + ("s" if s["n_calls"] != 1 else ""),
               "each node of the graph is one request to the model and its reply"),
        Number(f"{n_conv:,}", "conversation" + ("s" if n_conv != 1 else ""),
               f"one per root of the graph: {agent} the agent's, {n_conv - agent} subagents or side calls "
               f"({s['n_roots']} roots; retries of a first call folded into the conversation they retry)"),
        Number(compact(s["n_trainable_call_tokens"]), "tokens to train on",
               f"trainable tokens (calls): what the model sampled with loss mask 1, each call once; "
               f"{s['n_trainable_tokens']:,} summed over the {s['n_sequences']} training rows (rows)"),
    ]  # fmt: skip


NUMBERS_STYLE = (
    "<style>.rg-numbers{display:flex;gap:6px 20px;align-items:baseline;flex-wrap:wrap;font:14px system-ui,sans-serif;"
    "color:#334155}.rg-numbers b{font-size:24px;color:#0f172a;margin-right:5px;font-weight:650}"
    ".rg-q{display:inline-block;width:15px;height:15px;line-height:15px;text-align:center;border-radius:50%;"
    "border:1px solid #94a3b8;color:#64748b;font:600 10px system-ui;margin-left:4px;cursor:help;vertical-align:2px}"
    ".rg-findings{font-size:13px;border-radius:10px;padding:1px 9px}</style>"
)


def q(meaning: str) -> str:
    """A (?) whose tooltip is the one-line meaning (escaped)."""
    return f'<span class="rg-q" title="{html_text(meaning)}" aria-label="{html_text(meaning)}">?</span>'


def numbers_html(numbers: list[Number], rollout: Rollout, title: str = "") -> str:
    """The three numbers on one line (after ``title``, HTML the caller escaped), each with its
    (?), then the findings in a chip."""
    parts = title + "".join(
        f"<span><b>{html_text(n.value)}</b>{html_text(n.words)}{q(n.meaning)}</span>" for n in numbers
    )
    counts = rollout.finding_counts
    fatal, warn = counts[FATAL], counts[WARN]
    if fatal or warn:
        colour = ("#991b1b", "#fee2e2") if fatal else ("#92400e", "#fef3c7")
        words = ", ".join(x for x in (f"{fatal:,} FATAL" if fatal else "", f"{warn:,} WARN" if warn else "") if x)
        parts += (
            f'<span class="rg-findings" style="color:{colour[0]};background:{colour[1]}">{words} findings'
            f"{q('FATAL: unusable for training as recorded; WARN: read it before training on it. Listed under Findings, below the graph')}</span>"
        )
    return f'{NUMBERS_STYLE}<div class="rg-numbers">{parts}</div>'


def compact(n: int) -> str:
    """1,234 / 12.3k / 1.89M: numbers that fit a metric tile."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def headline_tiles(rollout: Rollout) -> list[tuple[str, str | int, str | None]]:
    """(label, value, help) per headline tile: retries the harness made are counted apart from
    replays of the model's own reply that broke the token prefix (pure)."""
    s, counts = rollout.stats, rollout.finding_counts
    return [
        ("calls", s["n_calls"], None),
        ("roots", s["n_roots"], None),
        ("forks", s["n_forks"], None),
        ("retries", s["n_discarded_retries"], "discarded calls the harness re-sent with the same prompt"),
        ("broken replays", s["n_broken_replays"],
         "the model's own reply replayed so that the token prefix broke (edited or re-tokenized): "
         "a new root or a call that only looks discarded"),
        ("trainable tokens (rows)", compact(s["n_trainable_tokens"]),
         "loss-mask-1 tokens summed over the training rows (a call in several rows counts in each; "
         f"{s['n_trainable_tokens_in_discarded_rows']:,} of them in discarded rows). Each call once: "
         f"{s['n_trainable_call_tokens']:,} trainable tokens (calls), the Audit panel's count"),
        ("FATAL · WARN", f"{counts[FATAL]} · {counts[WARN]}", "findings by level (the findings panel lists every code)"),
    ]  # fmt: skip
