"""The capture proxy: record every model call a harness makes, at the token level.

``rollout-graph capture`` puts an OpenAI-compatible server in front of a vLLM or SGLang engine.
Harnesses speak chat completions, completions, Anthropic Messages (Claude Code) or OpenAI
Responses (codex); every call goes upstream as chat completions (or completions) with token ids
and logprobs switched on, comes back to the harness in its own dialect without the fields it did
not ask for, and becomes one JSONL record (docs/formats.md, "Capture records").

Modules: :mod:`~rollout_graph.capture.sessions` (which rollout a call belongs to),
:mod:`~rollout_graph.capture.tokens` (what token capture adds and strips),
:mod:`~rollout_graph.capture.anthropic` and :mod:`~rollout_graph.capture.responses` (dialect translation),
:mod:`~rollout_graph.capture.writer` (the single JSONL writer) and :mod:`~rollout_graph.capture.server`
(the Starlette app and the uvicorn runner).
"""
