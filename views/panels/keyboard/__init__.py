"""Keyboard navigation and token pinning for the explorer.

Entry points: ``render(rollout, search_keys, search_label)`` (declares the small static component
``frontend/index.html``, which listens on the app's document and sends one checked event per key
or token click), ``handle(event)``, ``pinned`` / ``pin`` / ``unpin``.

Keys: j/k next or previous call, h/l (or the arrows) parent and first child, [ ] siblings, /
focuses the search box, Esc clears the search or unpins the token; while a token is pinned the
arrows move it. Keys typed into a text field are left alone (docs/user-guide.md, "Keys").

Where it sits: first in the explorer's selection fragment, so a key moves the selection every
panel below reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st
import streamlit.components.v1 as components

from rollout_graph.analysis import navigation
from rollout_graph.core.rollout import Rollout
from rollout_graph.ui import state
from rollout_graph.ui.builders.tokens import page_of

_component = components.declare_component("rg_keyboard", path=str(Path(__file__).parent / "frontend"))

COMPONENT_KEY = "rg-keyboard"
MOVES = {
    "next": navigation.NEXT,
    "previous": navigation.PREVIOUS,
    "parent": navigation.PARENT,
    "child": navigation.CHILD,
    "next_sibling": navigation.NEXT_SIBLING,
    "previous_sibling": navigation.PREVIOUS_SIBLING,
}


def pinned() -> tuple[str, int] | None:
    """The strip key and position of the pinned token, if a token is pinned in a token view the
    page shows (one drawn by the last run)."""
    key = st.session_state.get(state.PINNED_STRIP)
    if not key or key not in st.session_state.get(state.SHOWN_STRIPS, ()):
        return None
    position = st.session_state.get(f"{key}-mark")
    return (key, position) if isinstance(position, int) else None


def pin(key: str, position: int) -> None:
    """Pin (and ring) the token at ``position`` of the token view ``key``, turning to its page."""
    st.session_state[state.PINNED_STRIP] = key
    st.session_state[f"{key}-mark"] = position
    st.session_state[f"{key}-page"] = page_of(position)


def unpin() -> None:
    """Drop the pinned token (its ring goes too)."""
    key = st.session_state.get(state.PINNED_STRIP)
    if key:
        st.session_state[f"{key}-mark"] = None
    st.session_state[state.PINNED_STRIP] = None


def _move_token(delta: int) -> None:
    current = pinned()
    if current is None:
        return
    key, position = current
    size = st.session_state.get(f"{key}-size")
    upper = size - 1 if isinstance(size, int) else position + max(delta, 0)
    pin(key, min(max(0, position + delta), upper))


def handle(event: Any, rollout: Rollout, search_keys: list[str]) -> bool:
    """Carry out one event; True when the selection or view changed (the caller reruns)."""
    if not isinstance(event, dict) or not state.new_pick("keyboard", event.get("n")):
        return False
    action = event.get("action")
    if action == "arrow" and event.get("delta") in (-1, 1) and isinstance(event.get("delta"), int):
        if pinned() is not None:  # the pinned token moves token by token
            _move_token(event["delta"])
            return True
        action = "child" if event["delta"] == 1 else "parent"
    if action in MOVES:
        target = navigation.step(rollout.topology, state.current_node(rollout), MOVES[action])
        if target is None:
            return False
        state.select_node(rollout, target, keep_view=True)  # the DAG rings it in place when it is in view
        return True
    if action == "pin" and isinstance(event.get("strip"), str) and isinstance(event.get("pos"), int):
        key, position = event["strip"], event["pos"]
        if f"{key}-page" in st.session_state and position >= 0:  # a token view this session has drawn
            pin(key, position)
            return True
        return False
    if action == "escape":
        # The bridge clears the search itself (the box's own clear button) when Esc is pressed in
        # the box, or elsewhere with no token pinned; what reaches here unpins, or clears a search
        # the bridge could not (no clear button found).
        if pinned() is not None:
            unpin()
            return True
        cleared = False
        for key in search_keys:
            if st.session_state.get(key):
                st.session_state[key] = ""
                cleared = True
        return cleared
    return False


# Runs in the page itself (not a component's frame), as soon as the page is drawn: a component's
# frame loads a second or more later, and a key or a click made in that time was lost. It focuses
# the search box on "/" at once, and keeps the last step key (j, k, h, l, [, ]) and the last click in
# the DAG until the keyboard bridge and the DAG client listen; they act on them then.
EARLY_JS = """<script>
(function () {
  if (window.__rgEarly) return;
  window.__rgEarly = true;
  window.__rgKeyQueue = [];
  window.__rgClickQueue = [];
  document.addEventListener("keydown", function (e) {
    if (window.__rgKeyboardReady || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
    if (e.key === "/") {
      const box = document.querySelector('input[aria-label="SEARCH_LABEL"]');
      if (box) { e.preventDefault(); box.focus(); }
      return;
    }
    if ("jkhl[]".indexOf(e.key) >= 0 && e.key.length === 1) window.__rgKeyQueue.push(e.key);
  }, true);
  const hook = function () {
    document.querySelectorAll(".js-plotly-plot").forEach(function (gd) {
      if (gd.__rgEarlyHooked || !gd.on || !gd._fullData || !gd._fullData[1] || gd._fullData[1].name !== "calls") return;
      gd.__rgEarlyHooked = true;
      gd.on("plotly_click", function (ev) {
        if (gd.__rgDagClient) return;  // the DAG client listens: it sends the click
        const p = ev && ev.points && ev.points[0];
        if (!p) return;
        const custom = Array.isArray(p.customdata) ? p.customdata[0] : p.customdata;
        if (typeof custom === "number") window.__rgClickQueue.push({ curve: p.curveNumber, custom: custom });
      });
    });
  };
  const timer = setInterval(hook, 100);
  setTimeout(function () { clearInterval(timer); }, 120000);
})();
</script>"""


def early(search_label: str) -> None:
    """The page's early listener (``EARLY_JS``), drawn once at the top of every page run: our own
    script, never trace text."""
    st.html(EARLY_JS.replace("SEARCH_LABEL", search_label), unsafe_allow_javascript=True)


def render(rollout: Rollout, search_keys: list[str], search_label: str) -> None:
    """Draw the (invisible) bridge and act on its latest event. Call it before the panels that
    read the selection and before the search box (so Esc can clear it)."""
    handle(st.session_state.get(COMPONENT_KEY), rollout, search_keys)  # the latest event, before drawing
    st.session_state[state.SHOWN_STRIPS] = set()  # the token views below add themselves
    _component(search_label=search_label, key=COMPONENT_KEY, default=None)
