"""The capture proxy: record every model call a harness makes, at the token level.

``rollout-graph capture`` puts an OpenAI-compatible server in front of a vLLM or SGLang engine.
Harnesses speak chat completions, completions, Anthropic Messages (Claude Code), OpenAI Responses
(codex) or the Google Gemini API (gemini-cli); every call goes upstream as chat completions (or
completions) with token ids and logprobs switched on, comes back to the harness in its own dialect
without the fields it did not ask for, and becomes one JSONL record (docs/formats.md, "Capture
records"). Before it serves, the engine is probed (docs/live.md, "Engine probes").

Modules: :mod:`~rollout_graph.capture.sessions` (which rollout a call belongs to, session ids
checked, what is a secret), :mod:`~rollout_graph.capture.tokens` (what token capture adds and
strips, the output clamp, pinned sampling), :mod:`~rollout_graph.capture.anthropic`,
:mod:`~rollout_graph.capture.responses` and :mod:`~rollout_graph.capture.google` (dialect
translation), :mod:`~rollout_graph.capture.media` (inline images as placeholders in records),
:mod:`~rollout_graph.capture.probe` (the start-up probes), :mod:`~rollout_graph.capture.upstream`
(the HTTP client to the engine), :mod:`~rollout_graph.capture.writer` (the single JSONL writer)
and :mod:`~rollout_graph.capture.server` (the Starlette app and the uvicorn runner).
"""
