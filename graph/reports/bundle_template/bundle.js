// rollout-graph bundle: draws the rollout held in #rollout-data (rollout_graph/reports/bundle.py).
// Trace text is untrusted: it is read with JSON.parse and inserted with textContent (or as the
// value of a title attribute) only; no markup is ever built from it.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("rollout-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const ROLE_COLORS = { agent: "#1e40af", auxiliary: "#d97706", discarded: "#d1d5db" };
  const ROLE_INK = { agent: "#fff", auxiliary: "#111", discarded: "#111" };
  const DRAWN_MISSES = new Set(["rewritten_continuation", "retokenized", "compaction", "resumed"]);
  const PAGE = 3000; // tokens drawn at once; a button draws the next page
  const DX = 58, DY = 34, PAD = 26;
  const state = { s: 0, node: null, row: null, expanded: new Set(), ws: true, pinned: null, left: "graph", conv: 0, page: 0 };

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "onclick") e.addEventListener("click", v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function svg(tag, attrs, title) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (title !== undefined) {
      const t = document.createElementNS(SVG, "title");
      t.textContent = title;
      e.append(t);
    }
    return e;
  }
  const fmt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
  const S = () => DATA.sessions[state.s];
  const callId = (i) => S().calls[i].id;
  function shellQuote(text) {
    return /^[A-Za-z0-9._:@%+=,\/-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\"'\"'") + "'";
  }
  function badge(text, color, ink) {
    const b = el("span", { class: "badge", text: text });
    b.style.background = color;
    b.style.color = ink || "#fff";
    return b;
  }
  function notesFor(key, value) {
    return S().notes.filter((n) => n[key] === value);
  }
  function noteList(notes) {
    if (!notes.length) return null;
    return el(
      "div",
      { class: "notes" },
      ...notes.map((n) =>
        el(
          "div",
          { class: "note" },
          el("span", { class: "note-action a-" + (["drop", "mask", "keep"].includes(n.action) ? n.action : "keep"), text: n.action || "note" }),
          el("span", { class: "note-text", text: n.text }),
          el("span", { class: "muted", text: " · " + (n.author || "anonymous") + (n.created ? " · " + n.created : "") })
        )
      )
    );
  }

  // ---------- the URL fragment: #session=...&node=... (works from file://) ----------
  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const session = params.get("session");
    const s = DATA.sessions.findIndex((x) => x.session_id === session);
    if (s >= 0) state.s = s;
    const node = params.get("node");
    if (node !== null) {
      const i = S().calls.findIndex((c) => c.id === node);
      state.node = i >= 0 ? i : null;
    }
  }
  function writeHash() {
    const params = new URLSearchParams();
    params.set("session", S().session_id);
    if (state.node !== null) params.set("node", callId(state.node));
    history.replaceState(null, "", "#" + params.toString());
  }

  // ---------- header, headline numbers, findings ----------
  function header() {
    const top = el("header", {},
      el("h1", { text: "Rollout " + S().session_id }),
      el("div", { class: "muted", text: DATA.generator + " · bundled " + DATA.created + " · token text decoded with " + S().decoder })
    );
    if (DATA.sessions.length > 1) {
      const pick = el("select", { "aria-label": "rollout" });
      DATA.sessions.forEach((x, k) => pick.append(el("option", { value: String(k), text: x.session_id })));
      pick.value = String(state.s);
      pick.addEventListener("change", () => {
        state.s = Number(pick.value);
        state.node = null;
        state.row = null;
        state.expanded = new Set();
        writeHash();
        renderAll();
      });
      top.append(el("label", { class: "picker" }, "rollout ", pick));
    }
    return top;
  }
  function metrics() {
    const s = S().stats, f = S().finding_counts;
    const items = [
      ["calls", s.n_calls], ["roots", s.n_roots], ["forks", s.n_forks], ["discarded", s.n_discarded],
      ["leaves", s.n_leaves], ["training rows", s.n_sequences], ["trainable tokens", s.n_trainable_tokens],
      ["context tokens", s.n_context_tokens], ["retries", s.n_discarded_retries], ["broken replays", s.n_broken_replays],
      ["unfinished attempts", s.n_unfinished], ["FATAL", f.FATAL], ["WARN", f.WARN], ["INFO", f.INFO],
    ];
    return el("section", { class: "metrics" }, ...items.map(([label, v]) =>
      el("div", { class: "metric" + (label === "FATAL" && v ? " fatal" : "") }, el("div", { class: "value", text: fmt(v) }), el("div", { class: "label", text: label }))));
  }
  function findingsSection() {
    const box = el("details", { class: "findings", open: S().finding_counts.FATAL ? "" : null });
    box.append(el("summary", { text: "Findings (" + fmt(S().findings.length) + ")" }));
    for (const g of S().finding_groups) {
      const group = el("details", { class: "group" });
      group.append(el("summary", {}, el("span", { class: "lvl l-" + g.level, text: g.level }), " " + g.code + " ×" + g.count));
      const list = el("ul", {});
      for (const f of S().findings.filter((x) => x.level === g.level && x.code === g.code).slice(0, 200)) {
        const i = f.node_id === null ? -1 : S().calls.findIndex((c) => c.id === f.node_id);
        list.append(el("li", {},
          i >= 0 ? el("button", { class: "link", text: f.node_id, onclick: () => select(i) }) : null,
          (i >= 0 ? ": " : "") + f.detail));
      }
      group.append(list);
      box.append(group);
    }
    if (!S().finding_groups.length) box.append(el("p", { class: "muted", text: "No findings." }));
    return box;
  }
  function leftOutBanner() {
    const lo = S().left_out;
    if (!lo.n) return null;
    const first = state.node !== null && !(String(state.node) in S().details) ? [callId(state.node)] : lo.first;
    const command = lo.command.replace("{calls}", shellQuote(first.join(",")));
    return el("section", { class: "left-out", id: "left-out" },
      el("b", { text: "What this file leaves out: " }),
      "the token detail (tokens, logprobs, top-k, messages, diffs) of " + fmt(lo.n) + " of " + fmt(S().calls.length) +
        " calls, to keep it small. The DAG, every call's summary and findings and the training rows' numbers are all here. " +
        "To add calls, bundle again with --calls (or --node):",
      el("pre", { class: "command", text: command }));
  }

  // ---------- the DAG: collapsed chains, near-miss links, a click selects a call ----------
  // where each call is drawn: computed in Python by the app's own layout (rollout_graph.analysis.layout),
  // so the page, the app's DAG and Compare lay the rollout out the same way. A chain drawn call by
  // call shows the layout of every call.
  function layout() {
    const s = S(), full = state.expanded.size > 0;
    const P = full ? s.layout.all : s.layout.collapsed;
    const visible = P.visible, x = new Map(), y = new Map(), drawnParent = new Map(), via = new Map();
    visible.forEach((v, k) => { x.set(v, P.x[k]); y.set(v, P.y[k]); drawnParent.set(v, P.parent[k]); });
    if (!full) for (const c of s.chains) via.set(c.after, c);
    const shown = new Set(visible), hidden = new Set();
    for (let i = 0; i < s.calls.length; i++) if (!shown.has(i)) hidden.add(i);
    return { visible, drawnParent, via, x, y, rows: P.lanes, hidden };
  }
  function dag() {
    const s = S(), L = layout();
    let maxX = 0;
    for (const v of L.visible) maxX = Math.max(maxX, L.x.get(v));
    const labels = L.visible.length <= 120;
    const left = labels ? 58 : PAD;
    const width = left + PAD + maxX * DX + (labels ? 60 : 20), height = PAD * 2 + Math.max(0, L.rows - 1) * DY;
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "dag-svg", role: "img" });
    const px = (v) => left + L.x.get(v) * DX, py = (v) => PAD + L.y.get(v) * DY;
    const curve = (a, b) => {
      const x1 = px(a), y1 = py(a), x2 = px(b), y2 = py(b), m = (x1 + x2) / 2;
      return `M${x1},${y1} C${m},${y1} ${m},${y2} ${x2},${y2}`;
    };
    const edges = svg("g", { class: "edges" });
    for (const v of L.visible) {
      const p = L.drawnParent.get(v);
      if (p === null || p === undefined) continue;
      const chain = L.via.get(v);
      if (chain) {
        const path = svg("path", { d: curve(p, v), class: "edge chain" },
          `${chain.calls.length} calls in a chain (${callId(chain.calls[0])} … ${callId(chain.calls[chain.calls.length - 1])}), +${fmt(chain.growth)} prompt tokens: click to draw them`);
        path.addEventListener("click", () => { state.expanded.add(chain.calls[0]); drawDag(); });  // every call drawn
        edges.append(path);
        const label = svg("text", { x: (px(p) + px(v)) / 2, y: (py(p) + py(v)) / 2 + 15, class: "chain-label" });
        label.textContent = "+" + chain.calls.length;
        label.addEventListener("click", () => { state.expanded.add(chain.calls[0]); drawDag(); });
        edges.append(label);
      } else {
        edges.append(svg("path", { d: curve(p, v), class: "edge" + (s.calls[v].discarded ? " gone" : "") }));
      }
    }
    for (const m of s.near_misses) {
      if (!DRAWN_MISSES.has(m.kind) || L.hidden.has(m.earlier) || L.hidden.has(m.later)) continue;
      // a compaction's link starts at the call it summarised (where it is laid out after), as in the app
      const from = m.kind === "compaction" && s.laid_out_after[String(m.later)] !== undefined ? s.laid_out_after[String(m.later)] : m.earlier;
      if (L.hidden.has(from)) continue;
      edges.append(svg("path", { d: curve(from, m.later), class: "edge near k-" + m.kind },
        `near miss: ${callId(m.later)} ${m.kind.replace(/_/g, " ")} of ${callId(m.earlier)} (${fmt(m.common_prefix)} shared tokens)`));
    }
    root.append(edges);
    const nodes = svg("g", { class: "nodes" });
    for (const v of L.visible) {
      const c = s.calls[v];
      const g = svg("g", { class: "node" + (v === state.node ? " selected" : ""), "data-i": v, "data-id": c.id, transform: `translate(${px(v)},${py(v)})` },
        `${c.id} · ${c.role} · ${c.kind}${c.discarded ? " · discarded" : ""} · ${fmt(c.n_sampled)} sampled` +
          (c.findings.length ? ` · ${c.findings.length} findings` : ""));
      if (v === state.node) g.append(svg("circle", { r: 12, class: "ring" }));
      const dot = svg("circle", { r: 7, fill: ROLE_COLORS[c.role] || "#64748b", class: "dot" + (c.worst === "FATAL" ? " fatal" : "") });
      g.append(dot);
      if (c.discarded) g.append(svg("path", { d: "M-4,-4L4,4M4,-4L-4,4", class: "cross" }));
      if (labels) {
        const t = svg("text", { x: 0, y: -11, class: "label" });
        t.textContent = c.id.length > 8 ? "…" + c.id.slice(-7) : c.id; // ids often share a prefix; the tooltip has it whole
        g.append(t);
      }
      g.addEventListener("click", () => select(v));
      nodes.append(g);
    }
    root.append(nodes);
    const expandable = s.chains.length - state.expanded.size;
    const tools = el("div", { class: "dag-tools" },
      el("span", { class: "muted", text: `${fmt(L.visible.length)} of ${fmt(s.calls.length)} calls drawn` + (s.chains.length ? ` · ${fmt(s.chains.length)} chains of calls with nothing to say collapsed (click a +N edge to draw one)` : "") }),
      s.chains.length ? el("button", { text: expandable > 0 ? "Draw every call" : "Collapse chains", onclick: () => {
        state.expanded = expandable > 0 ? new Set(s.chains.map((c) => c.calls[0])) : new Set();
        drawDag();
      } }) : null);
    const legend = el("div", { class: "legend" },
      ...Object.entries(ROLE_COLORS).map(([role, color]) => el("span", {}, badge(role, color, ROLE_INK[role]))),
      el("span", { class: "muted", text: "× discarded · dashed orange: near miss · dashed grey +N: a collapsed chain · dark ring: the selected call · red outline: FATAL · keys as in the app: j / k next / previous call, h / l parent / first child, [ ] siblings, Esc" }));
    return el("section", { class: "dag", id: "dag" }, tools, el("div", { class: "dag-scroll" }, root), legend);
  }


  // ---------- the story: what the agent did, conversation by conversation (rollout_graph.analysis.story) ----------
  function storyWhere(i) {
    const convs = S().story.conversations;
    for (let k = 0; k < convs.length; k++) {
      const pos = convs[k].calls.indexOf(i);
      if (pos >= 0) return [k, pos];
    }
    for (let k = 0; k < convs.length; k++)
      for (const [after, lines] of Object.entries(convs[k].asides))
        if (lines.some((a) => a.calls.includes(i))) return [k, convs[k].calls.indexOf(Number(after))];
    return null;
  }
  function follow(i) {
    const at = i === null ? null : storyWhere(i);
    if (at) { state.conv = at[0]; state.page = Math.floor(at[1] / S().story.page_size); }
  }
  function blockEl(b) {
    const title = el("span", { class: "bt t-" + b.kind, text: b.title });
    const size = el("span", { class: "muted", text: " " + b.size });
    const cut = b.chars > b.text.length ? `\n… ${fmt(b.chars - b.text.length)} more characters (the call's Messages tab)` : "";
    const body = b.text.trim() ? el("pre", { class: "story-text", text: b.text + cut }) : null;
    const head = b.folded && body ? el("details", {}, el("summary", {}, title, size, el("span", { class: "peek", text: " " + b.peek })), body)
      : el("div", {}, title, size, body);
    const tools = b.tools.map(([name, peek, args]) => el("details", { class: "story-tool" },
      el("summary", {}, el("b", { text: name }), peek ? el("code", { text: " " + peek }) : null), el("pre", { class: "story-text", text: args })));
    return el("div", { class: "blk b-" + b.kind }, head, ...tools);
  }
  function chapterEl(i, step) {
    const s = S(), ch = s.story.chapters[String(i)], c = s.calls[i];
    const open = el("button", { class: "link", text: c.id, onclick: () => select(i) });
    const toGraph = el("button", { class: "to-graph", text: "◆ in the graph", onclick: () => { state.left = "graph"; select(i); } });
    const head = el("div", { class: "ch-h" }, toGraph, open, el("span", { class: "muted", text: ` step ${step}` }));
    const box = el("div", { class: "chapter" + (i === state.node ? " sel" : ""), "data-i": String(i) }, head);
    if (!ch) {
      box.append(el("p", { class: "muted", text: "This call's messages are not in this file (the story's size budget); its detail may be." }));
      return box;
    }
    const facts = `${fmt(ch.n_prompt)} prompt · ${fmt(ch.n_sampled)} sampled tokens` + (ch.finish && ch.finish !== "stop" ? ` · stopped: ${ch.finish}` : "") +
      (ch.shared ? ` · ${fmt(ch.shared)} earlier messages not repeated` : "") + (!ch.trained && ch.n_sampled ? " · not trained" : "") +
      (ch.fatal ? ` · ${ch.fatal} FATAL` : "") + (ch.warn ? ` · ${ch.warn} WARN` : "");
    head.append(el("span", { class: "muted", text: " · " + facts }));
    for (const b of ch.new) box.append(blockEl(b));
    for (const b of ch.reply) box.append(blockEl(b));
    if (!ch.reply.length) box.append(el("p", { class: "muted", text: "no reply recorded" }));
    return box;
  }
  function storyView() {
    const s = S(), st = s.story, convs = st.conversations;
    if (!convs.length) return el("section", { class: "story" }, el("p", { class: "muted", text: "No calls." }));
    state.conv = Math.min(state.conv, convs.length - 1);
    const conv = convs[state.conv], pages = Math.max(1, Math.ceil(conv.calls.length / st.page_size));
    state.page = Math.min(state.page, pages - 1);
    const pick = el("select", { "aria-label": "conversation" });
    convs.forEach((c, k) => pick.append(el("option", { value: String(k), text: `${c.title} · ${fmt(c.calls.length)} calls` })));
    pick.value = String(state.conv);
    pick.addEventListener("change", () => { state.conv = Number(pick.value); state.page = 0; drawDag(); });
    const out = el("section", { class: "story", id: "story" }, el("label", { class: "picker" }, "Conversation ", pick),
      el("div", { class: "conv-h" }, el("b", { text: conv.title }),
        el("span", { class: "muted", text: ` ${state.conv + 1} of ${convs.length} in this rollout · ${fmt(conv.calls.length)} model calls` + (conv.n_calls > conv.calls.length ? ` · ${fmt(conv.n_calls - conv.calls.length)} folded` : "") })));
    if (conv.break) {
      out.append(el("div", { class: "break" }, el("b", { text: "Why a new conversation: " }),
        `${conv.break.words} (after ${callId(conv.break.earlier)}).`, el("br"), conv.break.sentence,
        conv.break.evidence ? el("div", { class: "muted", text: "Evidence: " + conv.break.evidence }) : null));
    }
    const pager = () => el("div", { class: "pager" },
      el("button", { text: "‹ Earlier", disabled: state.page === 0 ? "" : null, onclick: () => { state.page -= 1; drawDag(); } }),
      el("span", { class: "muted", text: ` page ${state.page + 1} of ${pages} ` }),
      el("button", { text: "Later ›", disabled: state.page >= pages - 1 ? "" : null, onclick: () => { state.page += 1; drawDag(); } }));
    if (pages > 1) out.append(pager());
    const first = state.page * st.page_size;
    conv.calls.slice(first, first + st.page_size).forEach((i, k) => {
      for (const a of conv.asides[String(i)] || []) out.append(el("div", { class: "aside", text: "↳ " + a.text }));
      out.append(chapterEl(i, first + k + 1));
    });
    if (pages > 1) out.append(pager());
    if (st.left_out) out.append(el("p", { class: "muted", text: `${fmt(st.left_out)} calls' messages are left out of this file's story (its size budget); the graph and every call's summary are here.` }));
    return out;
  }
  function leftPane() {
    const sw = el("div", { class: "left-switch", role: "tablist" },
      ...[["graph", "◆ Graph"], ["story", "☰ Story: what the agent did"]].map(([k, label]) =>
        el("button", { role: "tab", "aria-selected": String(state.left === k), text: label, onclick: () => { state.left = k; follow(state.node); drawDag(); } })));
    return el("div", { class: "left", id: "left" }, sw, state.left === "story" ? storyView() : dag());
  }

  // ---------- token views ----------
  function shown(piece, special) {
    if (!state.ws || special) return piece;
    return piece.replace(/ /g, "·").replace(/\t/g, "→").replace(/\r/g, "␍").replace(/\n/g, "↵\n");
  }
  function bucket(lp) {
    const t = Math.min(1, Math.max(0, 1 - lp / DATA.logprob_floor));
    return Math.min(DATA.buckets - 1, Math.floor(t * DATA.buckets));
  }
  // A strip: [{id, piece, special, sampled, trained, lp, top, turn}] built from call details.
  function callTokens(i, turnLabel) {
    const d = S().details[String(i)], c = S().calls[i];
    const out = [];
    const cs = new Set(d.context_special), ss = new Set(d.sampled_special);
    d.context.forEach((piece, k) => out.push({ id: d.context_ids[k], piece, special: cs.has(k), sampled: false, call: i, turn: turnLabel && k === 0 ? c.id : null }));
    d.sampled.forEach((piece, k) => out.push({
      id: d.sampled_ids[k], piece, special: ss.has(k), sampled: true, trained: c.trainable,
      lp: d.logprobs ? d.logprobs[k] : null, top: d.top ? d.top[k] : null, call: i,
      turn: turnLabel && k === 0 && !d.context.length ? c.id : null,
    }));
    return out;
  }
  function rank(t) {
    if (!t.top || !t.top.length) return "rank unknown";
    const k = t.top.findIndex((a) => a[1] === t.id);
    return k >= 0 ? `rank ${k + 1} of ${t.top.length} recorded` : `not in the top ${t.top.length}`;
  }
  function tip(t, pos) {
    const lines = [`#${pos} · id ${t.id} · ${JSON.stringify(t.piece)}`];
    if (!t.sampled) {
      lines.push("context (mask 0): conditioned on, not trained");
      return lines.join("\n");
    }
    const state_ = t.trained ? "trained (mask 1)" : "sampled but NOT trained (mask 0)";
    if (t.lp === null || t.lp === undefined) lines.push("sampled · no valid logprob · " + state_);
    else {
      lines.push(`sampled · logprob ${t.lp.toFixed(4)} · p ${Math.exp(t.lp).toFixed(4)} · ${rank(t)}`);
      lines.push(state_);
    }
    if (t.top && t.top.length) {
      lines.push("alternatives:");
      for (const [piece, id, lp] of t.top) lines.push(`  ${JSON.stringify(piece)} (id ${id}) ${lp === null ? "?" : lp.toFixed(3)}`);
    }
    return lines.join("\n");
  }
  function classes(t) {
    let kind;
    if (!t.sampled) kind = "c";
    else if (!t.trained || t.lp === null || t.lp === undefined) kind = "u";
    else kind = "b" + bucket(t.lp);
    return "t " + kind + (t.special ? " s" : "");
  }
  function strip(tokens, caption) {
    const box = el("div", { class: "strip" });
    const inspector = el("pre", { class: "inspector", text: "Hover a token for its numbers; click one to pin them here." });
    const body = el("div", { class: "tokens" });
    let drawn = 0;
    const more = el("button", { class: "more" });
    function page() {
      const stop = Math.min(tokens.length, drawn + PAGE);
      const frag = document.createDocumentFragment();
      for (let p = drawn; p < stop; p++) {
        const t = tokens[p];
        if (t.turn) frag.append(el("div", { class: "turn", text: t.turn }));
        const span = el("span", { class: classes(t), "data-i": String(p), title: tip(t, p) });
        span.textContent = shown(t.piece, t.special) || "\u200b";
        frag.append(span);
      }
      body.append(frag);
      drawn = stop;
      more.textContent = `Draw the next ${fmt(Math.min(PAGE, tokens.length - drawn))} of ${fmt(tokens.length - drawn)} tokens left`;
      more.hidden = drawn >= tokens.length;
    }
    more.addEventListener("click", page);
    body.addEventListener("click", (e) => {
      const span = e.target.closest("span.t");
      if (!span) return;
      body.querySelectorAll("span.t.m").forEach((x) => x.classList.remove("m"));
      span.classList.add("m");
      inspector.textContent = span.title;
    });
    page();
    const n = tokens.length, nSampled = tokens.filter((t) => t.sampled).length;
    box.append(el("div", { class: "muted", text: (caption || "") + ` ${fmt(n)} tokens: ${fmt(n - nSampled)} context (mask 0), ${fmt(nSampled)} sampled.` }), legend(), body, more, inspector);
    return box;
  }
  function legend() {
    const stops = [];
    for (let b = 0; b < DATA.buckets; b += 4) stops.push(el("span", { class: "t b" + b, text: "\u2007" }));
    return el("div", { class: "legend" },
      el("span", {}, el("span", { class: "t c", text: "context" }), " mask 0, not trained"),
      el("span", {}, "sampled, logprob " + DATA.logprob_floor + " ", ...stops, " 0 (cividis; darker = less likely)"),
      el("span", {}, el("span", { class: "t u", text: "sampled" }), " not trained (no valid logprob, or the call is not trained)"),
      el("label", {}, (() => {
        const box = el("input", { type: "checkbox" });
        box.checked = state.ws;
        box.addEventListener("change", () => { state.ws = box.checked; drawDetail(); drawRows(); });
        return box;
      })(), " show whitespace (· space ↵ newline → tab)"));
  }

  // ---------- one call ----------
  function leftOutFor(i) {
    const lo = S().left_out;
    const command = lo.command ? lo.command.replace("{calls}", shellQuote(callId(i))) : "";
    return el("div", { class: "left-out" }, "This call's token detail (tokens, logprobs, top-k, messages, diffs) is not in this file. To add it:", el("pre", { class: "command", text: command }));
  }
  function facts(i) {
    const s = S(), c = s.calls[i];
    const ids = (list) => list.map((k) => callId(k)).join(", ");
    const rows = [
      ["parent", c.parent === null ? "none (a root)" : callId(c.parent)],
      ["root", callId(c.root)],
      ["children", c.children.length ? ids(c.children) : "none (a leaf)"],
      ["linked by", c.linked_by || "nothing: a root"],
      ["discarded", c.discarded ? "yes: sibling " + callId(c.continued_by) + " continued" : "no"],
      ["tokens", `prompt ${fmt(c.n_prompt)} (context ${fmt(c.n_context)}) · sampled ${fmt(c.n_sampled)}`],
      ["trained", c.trainable ? "yes" : "no" + (c.n_sampled ? "" : " (no sampled tokens)")],
      ["finish reason", String(c.finish_reason)],
      ["model", String(c.model)],
      ["source", c.source],
    ];
    const table = el("table", { class: "facts" });
    for (const [k, v] of rows) table.append(el("tr", {}, el("th", { text: k }), el("td", { text: v })));
    return table;
  }
  function relatives(i) {
    const c = S().calls[i];
    const out = el("div", { class: "relatives" });
    if (c.parent !== null) out.append(el("button", { text: "↑ parent " + callId(c.parent), onclick: () => select(c.parent) }));
    for (const k of c.children) out.append(el("button", { text: "↓ " + callId(k), onclick: () => select(k) }));
    return out;
  }
  // tokens as boxes: the text (whitespace shown with the toggle) over the id; the first differing id marked
  function boxes(pieces, ids, first, more) {
    const out = el("div", { class: "boxes" }, ...pieces.map((p, k) => el("span", { class: "box" + (first === null || first === undefined ? "" : k === first ? " first" : k > first ? " after" : "") },
      el("span", { class: "t", text: shown(p, false).replace(/\n/g, "") || "∅" }), el("span", { class: "i", text: String(ids[k]) }))));
    if (more) out.append(el("span", { class: "muted", text: " …" }));
    return out;
  }
  function nearMiss(d, m, heading) {
    const kept = m.where !== "prompt" ? `, after ${Math.round(m.kept * 100)}% of its sampled tokens were kept` : "";
    const box = el("details", { class: "near-miss", open: "" },
      el("summary", { text: heading }),
      el("p", { text: (m.dropped ? m.dropped + ". " : "") + m.why + ` ${m.later_id}'s prompt shares ${fmt(m.common_prefix)} tokens with the end of ${m.earlier_id}; the break falls ${m.where_text}${kept}.` + (m.fix ? ` Fix: ${m.fix}.` : "") }));
    if (m.boundaries) {
      box.append(el("div", {},
        el("h5", { text: m.earlier_id + ": the tokens the model sampled" }), boxes(m.boundaries.sampled, m.boundaries.sampled_ids, 0, false),
        el("h5", { text: m.later_id + ": the same text, as the replay was tokenized" }), boxes(m.boundaries.replayed, m.boundaries.replayed_ids, 0, false)));
    }
    for (const side of [m.tokens.earlier, m.tokens.later]) {
      box.append(el("h5", { text: `${side.call}: ${side.what}` }), boxes(side.pieces, side.ids, side.first, side.more));
    }
    box.append(el("h5", { text: "text diff (identical text is never marked)" }),
      el("div", { class: "textdiff" }, ...m.diff.map(([op, text]) => el("span", { class: op, text: shown(text, false) }))));
    return box;
  }
  function fork(d) {
    // one row per child (columns broke each text every few characters in a narrow pane)
    const box = el("details", { class: "fork", open: "" }, el("summary", { text: `Fork: its ${d.fork.length} children, where each departs` }));
    for (const col of d.fork) {
      let note = "";
      if (col.divergence !== undefined) {
        const top = { true: "in", false: "not in", null: "no alternatives recorded for" }[String(col.in_original_top_k)];
        const lp = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(3));
        note = ` · departs at sampled token ${col.divergence}: logprob ${lp(col.logprob)} here vs ${lp(col.original_logprob)} in the first; ${top} the first's top-k`;
      }
      box.append(el("div", { class: "fork-row" }, el("h5", { text: `${col.node_id} · ${col.state}${note}` }),
        el("pre", {}, el("span", { class: "same", text: col.same }), el("span", { class: col.original ? "del" : "ins", text: col.changed }))));
    }
    return box;
  }
  function messages(d) {
    const m = d.messages;
    const box = el("div", { class: "chat" });
    if (m.tools.length) box.append(el("div", { class: "muted", text: `tools (${m.tools.length}): ${m.tools.join(", ")}` }));
    const one = (msg, response) => {
      const role = el("div", { class: "role", text: (response ? "response · " : "") + msg.role });
      const body = el("div", { class: "body", text: msg.text });
      const lines = msg.text.split("\n").length;
      const fold = !response && (msg.role === "system" || msg.role === "developer" || msg.text.length > 1200 || lines > 16);
      const inner = fold
        ? el("details", {}, el("summary", {}, role, el("span", { class: "muted", text: ` ${fmt(msg.text.length)} characters` + (lines > 1 ? ` · ${fmt(lines)} lines` : "") })), body)
        : el("div", {}, role, body);
      return el("div", { class: "msg r-" + msg.role.replace(/[^a-z]/g, "") + (response ? " resp" : "") }, inner,
        msg.extra ? el("pre", { class: "extra", text: msg.extra }) : null);
    };
    for (const msg of m.request) box.append(one(msg, false));
    if (m.response) box.append(one(m.response, true));
    if (!m.request.length && !m.response) box.append(el("p", { class: "muted", text: "No messages recorded for this call." }));
    return box;
  }
  function rowTokens(r) {
    const s = S();
    if (!r.nodes.every((k) => String(k) in s.details)) {
      const missing = r.nodes.filter((k) => !(String(k) in s.details)).map(callId);
      const lo = s.left_out;
      return el("div", { class: "left-out" }, `The tokens of this row need the detail of ${missing.length} calls not in this file. To add them:`,
        el("pre", { class: "command", text: lo.command.replace("{calls}", shellQuote(missing.join(","))) }));
    }
    const tokens = r.nodes.flatMap((k) => callTokens(k, true));
    return strip(tokens, `Training row ending at ${r.leaf_id} (${r.role}): the calls' context spans (mask 0) and sampled spans, as the trainer reads it.`);
  }
  function rowsTable(rows, onPick) {
    const table = el("table", { class: "rows" });
    table.append(el("tr", {}, ...["leaf", "role", "calls", "trainable tokens", "context tokens", "prompt_len", "notes"].map((h) => el("th", { text: h }))));
    for (const r of rows) {
      const notes = notesFor("leaf", r.leaf_id);
      const tr = el("tr", { class: "row-pick" + (state.row === r.leaf ? " picked" : ""), "data-leaf": r.leaf_id },
        el("td", {}, el("button", { class: "link", text: r.leaf_id, onclick: () => onPick(r) })),
        el("td", {}, badge(r.role, ROLE_COLORS[r.role] || "#64748b", ROLE_INK[r.role])),
        el("td", { text: fmt(r.n_calls) }), el("td", { text: fmt(r.n_trainable) }), el("td", { text: fmt(r.n_context) }),
        el("td", { text: fmt(r.prompt_len) }), el("td", {}, noteList(notes)));
      table.append(tr);
    }
    return table;
  }
  function tabs(specs) {
    const bar = el("div", { class: "tabs", role: "tablist" }), panel = el("div", { class: "tab-panel" });
    specs.forEach(([label, build], k) => {
      const b = el("button", { role: "tab", text: label });
      b.addEventListener("click", () => {
        bar.querySelectorAll("button").forEach((x) => x.setAttribute("aria-selected", "false"));
        b.setAttribute("aria-selected", "true");
        panel.replaceChildren(build());
      });
      bar.append(b);
      if (k === 0) { b.setAttribute("aria-selected", "true"); panel.append(build()); }
    });
    return el("div", {}, bar, panel);
  }
  function detail() {
    const s = S();
    if (state.node === null) return el("section", { class: "detail", id: "detail" }, el("p", { class: "hint", text: "Click a call in the graph to see its tokens, messages and training rows." }));
    const i = state.node, c = s.calls[i], d = s.details[String(i)];
    const head = el("div", { class: "call-title" }, el("span", { class: "call-id", text: c.id }), el("span", { class: "muted", text: " arrival #" + i }));
    const badges = el("div", {}, badge(c.role, ROLE_COLORS[c.role] || "#64748b", ROLE_INK[c.role]), badge(c.kind, "#475569"));
    if (!c.trainable && c.n_sampled) badges.append(badge("not trained", "#dc2626"));
    const fatal = c.findings.filter((f) => f.level === "FATAL").length;
    if (fatal) badges.append(badge(fatal + " FATAL", "#991b1b"));
    const box = el("section", { class: "detail", id: "detail" }, head, badges, relatives(i), noteList(notesFor("node", c.id)), facts(i));
    if (d && d.near_miss) box.append(nearMiss(d, d.near_miss, `Near miss: ${d.near_miss.why.split(" [")[0]}`));
    if (d && d.replaced_by) box.append(nearMiss(d, d.replaced_by, `Replaced by ${d.replaced_by.later_id}: ${d.replaced_by.why.split(" [")[0]}`));
    if (!(d && (d.near_miss || d.replaced_by))) {
      const m = s.near_misses.find((x) => x.node === i);
      if (m) box.append(el("p", { text: `Near miss: ${m.kind.replace(/_/g, " ")} of ${callId(m.earlier === i ? m.later : m.earlier)} (${fmt(m.common_prefix)} shared tokens).` }));
    }
    if (d && d.fork) box.append(fork(d));
    const through = s.rows.filter((r) => r.nodes.includes(i)).sort((a, b) => (a.role !== "agent") - (b.role !== "agent") || b.n_trainable - a.n_trainable);
    box.append(tabs([
      ["Tokens", () => (d ? strip(callTokens(i, false), "The context span (what the harness added since the parent's end: tool output, user text, template glue) then the sampled span.") : leftOutFor(i))],
      ["Messages", () => (d ? messages(d) : leftOutFor(i))],
      [`Training rows (${through.length})`, () => {
        if (!through.length) return el("p", { class: "muted", text: "No training row runs through this call." });
        const out = el("div", {});
        const shownRow = el("div", {});
        out.append(rowsTable(through, (r) => shownRow.replaceChildren(rowTokens(r))), shownRow);
        shownRow.append(rowTokens(through[0]));
        return out;
      }],
      [`Findings (${c.findings.length})`, () => {
        if (!c.findings.length) return el("p", { class: "muted", text: "No findings for this call." });
        const t = el("table", { class: "rows" });
        t.append(el("tr", {}, el("th", { text: "level" }), el("th", { text: "code" }), el("th", { text: "detail" })));
        for (const f of c.findings) t.append(el("tr", {}, el("td", {}, el("span", { class: "lvl l-" + f.level, text: f.level })), el("td", { text: f.code }), el("td", { text: f.detail })));
        return t;
      }],
    ]));
    return box;
  }

  // ---------- the page ----------
  const slots = {};
  function rowsSection() {
    const s = S();
    const shownRow = el("div", { id: "row-tokens" });
    const pick = (r) => { state.row = r.leaf; drawRows(); };
    const box = el("section", { class: "training", id: "rows" }, el("h2", { text: `Training rows (${s.rows.length})` }),
      el("p", { class: "muted", text: "One row per leaf: the path from its root, as rollout-graph export writes it. Click a leaf for its tokens." }),
      rowsTable(s.rows, pick), shownRow);
    const r = s.rows.find((x) => x.leaf === state.row);
    if (r) shownRow.append(rowTokens(r));
    return box;
  }
  function notesSection() {
    const notes = S().notes;
    if (!notes.length) return null;
    return el("section", { class: "all-notes" }, el("h2", { text: `Notes (${notes.length})` }),
      ...notes.map((n) => el("div", {}, el("button", { class: "link", text: n.node || n.leaf, onclick: () => {
        const i = S().calls.findIndex((c) => c.id === (n.node || n.leaf));
        if (i >= 0) select(i);
      } }), noteList([n]))));
  }
  function put(name, node) {
    const fresh = node || el("div", { hidden: "" });
    slots[name].replaceWith(fresh);
    slots[name] = fresh;
  }
  function drawDag() { put("dag", leftPane()); }
  function drawDetail() { put("detail", detail()); put("leftOut", leftOutBanner()); }
  function drawRows() { put("rows", rowsSection()); }
  function select(i) {
    state.node = i;
    if (state.left === "story") follow(i);
    writeHash();
    drawDag();
    drawDetail();
    const target = slots.dag.querySelector(`g.node[data-i="${i}"], .chapter[data-i="${i}"]`);
    if (target && target.scrollIntoView) target.scrollIntoView({ block: "nearest", inline: "center" });
  }
  function renderAll() {
    const app = document.getElementById("app");
    document.title = S().session_id + " · rollout-graph";
    for (const name of ["dag", "detail", "leftOut", "rows"]) slots[name] = el("div", {});
    const split = el("div", { class: "split" }, slots.dag, slots.detail);
    app.replaceChildren(header(), metrics(), slots.leftOut, findingsSection(), notesSection() || "", split, slots.rows);
    drawDag();
    drawDetail();
    drawRows();
  }

  if (DATA.open) {
    state.s = Math.max(0, DATA.sessions.findIndex((x) => x.session_id === DATA.open.session));
    state.node = DATA.open.node;
  }
  readHash();
  renderAll();
  if (state.node !== null) writeHash();
  window.addEventListener("hashchange", () => { readHash(); renderAll(); });
  // keys, as in the app: j / k the next / previous call (arrival order), h / l (or ← / →) the parent /
  // first child, [ / ] (or ↑ / ↓) the sibling before / after, Esc back to the overview
  document.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const s = S();
    if (e.key === "Escape") { state.node = null; writeHash(); drawDag(); drawDetail(); return; }
    if (state.node === null) {
      if (e.key === "j" || e.key === "k") { e.preventDefault(); select(0); }
      return;
    }
    const c = s.calls[state.node];
    let next = null;
    if (e.key === "j") next = state.node + 1 < s.calls.length ? state.node + 1 : null;
    else if (e.key === "k") next = state.node > 0 ? state.node - 1 : null;
    else if (e.key === "h" || e.key === "ArrowLeft") next = c.parent;
    else if (e.key === "l" || e.key === "ArrowRight") next = c.children.length ? c.children[0] : null;
    else if (["[", "]", "ArrowUp", "ArrowDown"].includes(e.key)) {
      const siblings = c.parent === null ? s.calls.map((x, k) => k).filter((k) => s.calls[k].parent === null) : s.calls[c.parent].children;
      const k = siblings.indexOf(state.node) + (e.key === "[" || e.key === "ArrowUp" ? -1 : 1);
      next = k >= 0 && k < siblings.length ? siblings[k] : null;
    } else return;
    e.preventDefault();
    if (next !== null && next !== undefined) select(next);
  });
  document.body.dataset.ready = "1";
})();
