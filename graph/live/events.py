"""What ``rollout-graph tail`` reports: each call as it is linked, adoptions, near misses named or
renamed, file notices and skipped records while following, and the discarded calls once the follow
ends, as JSON-ready dicts and as one-line text; a session's engine as the capture proxy's probes
found it (rollout_graph.core.engine) is reported once, before its first call.

:class:`EventLog` remembers what it reported per session (parent, near miss) and, after each poll,
compares the re-analysed rollouts with it. So the last parent and the last near miss reported for
every call are the ones in the current rollout, which is what ``inspect`` says once the files are
complete; the words are the library's one sentence for a near miss
(rollout_graph.analysis.near_miss.describe), so ``tail`` and ``inspect``/``explain`` read the same.

Discarded verdicts wait for the end of the follow (:meth:`EventLog.finish`). By the rules of
docs/semantics.md ("Discarded") a call is discarded while it has no child and a sibling has one,
so any later call can undo the verdict (a child of the call, in any arrival order) or make it
again (a better parent adopting that child away). No point while following is final, so ``tail``
never prints a verdict it may have to take back: ``finish`` prints every discarded call of the
trace as it is then, with why it was dropped (``replaced_by``: the LATER call that re-sent or
replayed it), which equals ``inspect``'s. A call's near miss always names an EARLIER call, so it is
printed with the call as it arrives (docs/semantics.md, "Near misses").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollout_graph.analysis.near_miss import NearMiss, describe, near_miss_json, replaced_json
from rollout_graph.core.engine import describe as describe_engine
from rollout_graph.core.engine import engines
from rollout_graph.core.rollout import Rollout
from rollout_graph.live.trace import NEW, REMOVED, LiveTrace, Update

CALL = "call"
ADOPTED = "adopted"
RELINKED = "relinked"
DISCARDED = "discarded"
UNDISCARDED = "undiscarded"  # no longer printed: verdicts wait for the end of the follow
FINAL = "final"  # the end of the follow: the discarded calls follow
EXPLAINED = "explained"  # a near miss named for a call already reported, or renamed by new evidence
SKIPPED = "skipped"
FILE = "file"
ENGINE = "engine"  # what the capture proxy's probes found of a session's engine, once per engine


def near_miss_text(rollout: Rollout, miss: NearMiss | None, node: int) -> str:
    """One line on why a call broke from the call it nearly continued: the library's sentence."""
    if miss is None:
        first = rollout.topology.roots[:1] == [node]
        return "first root" if first else "new conversation: shares no token with an earlier call"
    return describe(rollout.calls, miss)


def _live_miss(rollout: Rollout, i: int) -> NearMiss | None:
    """The near miss ``tail`` prints for call ``i`` while following: the earlier call it nearly
    continued (why a call looks dropped waits for the verdict: :meth:`EventLog.finish`)."""
    return rollout.near_misses.get(i)


def _miss_key(rollout: Rollout, miss: NearMiss | None) -> tuple | None:
    """What a reader sees of a near miss: a change in any of it is reported."""
    if miss is None:
        return None
    calls = rollout.calls
    return (miss.kind, calls[miss.earlier].node_id, calls[miss.later].node_id, miss.common_prefix, miss.evidence)


class EventLog:
    """What was reported so far, per session; :meth:`events` brings it up to date."""

    def __init__(self, session: str | None = None) -> None:
        self.session = session  # report only this session
        self._parents: dict[str, dict[str, str | None]] = {}
        self._misses: dict[str, dict[str, tuple | None]] = {}
        self._engines: dict[str, list[dict[str, Any]]] = {}  # engine summaries reported, per session

    def events(self, trace: LiveTrace, update: Update) -> list[dict[str, Any]]:
        """The events of one poll: file notices, skipped records, then per changed session its
        new calls (in arrival order), adoptions and renamed near misses (no discarded verdict:
        :meth:`finish`)."""
        out: list[dict[str, Any]] = []
        restarted = False
        for notice in update.notices:
            event: dict[str, Any] = {"event": FILE, "file": notice.file, "status": notice.kind}
            if notice.kind not in (NEW, REMOVED):
                event["dropped"] = notice.dropped
                restarted = True
            out.append(event)
        out += [{"event": SKIPPED, "file": s.file, "line": s.line, "reason": s.reason} for s in update.skipped]
        for sid in trace.session_ids:
            if sid in update.sessions and (self.session is None or sid == self.session):
                out += self._session_events(trace.rollout(sid), restarted)
        return out

    def _session_events(self, rollout: Rollout, restarted: bool) -> list[dict[str, Any]]:
        sid = rollout.session_id
        printed = self._parents.setdefault(sid, {})
        misses = self._misses.setdefault(sid, {})
        calls, topo = rollout.calls, rollout.topology
        present = {c.node_id for c in calls}
        for gone in [n for n in printed if n not in present]:  # dropped by a restarted file
            del printed[gone]
            misses.pop(gone, None)
        new, changed = [], []
        known = self._engines.setdefault(sid, [])
        for engine in engines(calls):  # before the session's calls: the engine they ran on
            if engine not in known:
                known.append(engine)
                new.append({"event": ENGINE, "session_id": sid, "engine": engine, "text": describe_engine(engine)})
        for i, call in enumerate(calls):
            parent = topo.parents[i]
            parent_id = None if parent is None else calls[parent].node_id
            miss = _live_miss(rollout, i)
            if call.node_id not in printed:
                new.append(self._call_event(rollout, i, parent_id, miss))
            elif printed[call.node_id] != parent_id:
                changed.append(
                    {
                        "event": ADOPTED if parent_id is not None and not restarted else RELINKED,
                        "session_id": sid,
                        "node_id": call.node_id,
                        "parent_id": parent_id,
                        "previous_parent_id": printed[call.node_id],
                        "linked_by": rollout.linked_by[i],
                        "near_miss": None if miss is None else near_miss_json(calls, miss),
                    }
                )
            elif misses.get(call.node_id) != _miss_key(rollout, miss):
                changed.append(self._explained_event(rollout, i, miss))
            printed[call.node_id] = parent_id
            misses[call.node_id] = _miss_key(rollout, miss)
        return new + changed

    def finish(self, trace: LiveTrace) -> list[dict[str, Any]]:
        """The end of the follow: one ``final`` event, then per session the discarded calls of the
        trace as it is now (by arrival), each with the sibling that continued and the near miss
        that explains it: ``inspect``'s verdicts on the same files. A discarded call's near miss
        was held back while following; it is part of its ``discarded`` event."""
        out: list[dict[str, Any]] = []
        for sid in trace.session_ids:
            if self.session is not None and sid != self.session:
                continue
            rollout = trace.rollout(sid)
            for i, sibling in sorted(rollout.topology.discarded.items()):
                out.append(self._discard_event(rollout, i, rollout.calls[sibling].node_id))
                self._misses.setdefault(sid, {})[rollout.calls[i].node_id] = _miss_key(
                    rollout, rollout.near_misses.get(i)
                )
        return [{"event": FINAL, "n_discarded": len(out)}, *out]

    def _call_event(self, rollout: Rollout, i: int, parent_id: str | None, miss: NearMiss | None) -> dict[str, Any]:
        call = rollout.calls[i]
        event: dict[str, Any] = {
            "event": CALL,
            "session_id": rollout.session_id,
            "node_id": call.node_id,
            "index": i,
            "parent_id": parent_id,
            "linked_by": rollout.linked_by[i],
            "near_miss": None if miss is None else near_miss_json(rollout.calls, miss),
            "discarded": False,  # verdicts wait for the end of the follow (EventLog.finish)
            "continued_by": None,
            "n_prompt": call.n_prompt,
            "n_sampled": call.n_sampled,
            "n_context": call.n_prompt - rollout.context_start(i),
            "source": {"file": call.source, "line": call.line},
        }
        if parent_id is None or miss is not None:
            event["why"] = near_miss_text(rollout, miss, i)
        return event

    def _explained_event(self, rollout: Rollout, i: int, miss: NearMiss | None) -> dict[str, Any]:
        """A call's near miss named, renamed by new evidence, or gone (None: it links exactly now)."""
        return {
            "event": EXPLAINED,
            "session_id": rollout.session_id,
            "node_id": rollout.calls[i].node_id,
            "near_miss": None if miss is None else near_miss_json(rollout.calls, miss),
            "why": "no near miss any more" if miss is None else near_miss_text(rollout, miss, i),
        }

    def _discard_event(self, rollout: Rollout, i: int, continued: str) -> dict[str, Any]:
        """A discarded call: the earlier call it nearly continued (``near_miss``), the later call
        that replaced it (``replaced_by``) and, in ``why``, why it was dropped."""
        call, calls, discarded = rollout.calls[i], rollout.calls, rollout.topology.discarded
        miss, replaced = rollout.near_misses.get(i), rollout.replaced_by.get(i)
        event: dict[str, Any] = {
            "event": DISCARDED,
            "session_id": rollout.session_id,
            "node_id": call.node_id,
            "continued_by": continued,
            "near_miss": None if miss is None else near_miss_json(calls, miss),
            "replaced_by": None if replaced is None else replaced_json(calls, replaced, discarded),
        }
        if replaced is not None:
            event["why"] = describe(
                calls, replaced
            )  # the later call's sentence (why it looks dropped: replaced_by.dropped)
        elif miss is not None:
            event["why"] = near_miss_text(rollout, miss, i)
        return event


def event_text(event: dict[str, Any]) -> str:
    """One line for a person reading ``tail``'s output."""
    kind = event["event"]
    if kind == FILE:
        name = Path(event["file"]).name
        return {
            NEW: f"· following {event['file']}",
            REMOVED: f"· {name} was removed; keeping what was read from it",
        }.get(
            event["status"],
            f"· {name} was {event['status']}: dropped its {event.get('dropped', 0):,} calls, reading it again from the start",
        )
    if kind == FINAL:
        n = event["n_discarded"]
        if not n:
            return "· the follow ended: no call is discarded"
        return f"· the follow ended: {n:,} discarded call{'s' if n != 1 else ''} (verdicts wait until now: a later call can continue any call)"
    if kind == SKIPPED:
        return f"! {Path(event['file']).name}:{event['line']} skipped: {event['reason']}"
    if kind == ENGINE:
        return f"[{event['session_id']}] engine: {event['text']}"
    head = f"[{event['session_id']}] {event['node_id']}"
    if kind == CALL:
        if event["parent_id"] is None:
            text = f"{head}  new root"
        else:
            text = f"{head}  ← {event['parent_id']} by {event['linked_by']}"
            if event["linked_by"] != "messages":
                text += f" (+{event['n_context']:,} context, {event['n_sampled']:,} sampled tokens)"
        return text + (f" · {event['why']}" if "why" in event else "")
    if kind == ADOPTED:
        was = event["previous_parent_id"] or "a root"
        return f"{head}  adopted by {event['parent_id']} (late arrival; was {was}), by {event['linked_by']}"
    if kind == RELINKED:
        return f"{head}  relinked: parent {event['parent_id'] or 'none (a root)'} (was {event['previous_parent_id'] or 'a root'})"
    if kind == DISCARDED:
        why = f" ({event['why']})" if "why" in event else ""
        return f"{head}  discarded: {event['continued_by']} continued{why}"
    if kind == UNDISCARDED:
        return f"{head}  no longer discarded"
    if kind == EXPLAINED:
        return f"{head}  {event['why']}"
    return f"{head}  {kind}"
