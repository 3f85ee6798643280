"""The capture proxy's start-up probes: what the engine returns, asked before it serves.

Where it sits: ``rollout-graph capture`` (:func:`rollout_graph.capture.server.serve`) calls
:func:`probe_engine` once, unless ``--no-probe``. :func:`write_report` puts the report beside the
capture file (``capture-<time>.probe.json``), :func:`summary` onto every record as ``engine``, which
the loader keeps for the findings (rollout_graph.core.engine) and ``inspect``, ``tail`` and the app show.

Four probes, each bounded by ``timeout``: the model served (``GET /v1/models``), token ids, logprobs
raw or processed (the top-2 gap halves from T=1 to T=2 only when they are processed) and tool calling.
What each answers and the findings they decide: docs/live.md, "Engine probes".
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson

PROBE_SUFFIX = ".probe.json"
COOL, HOT = 1.0, 2.0  # the temperatures the gap is compared at
SENTINEL = 100.0  # a logprob below -SENTINEL stands for minus infinity, not a measurement
FLAT = 0.5  # a gap under this at T=1 is too flat to tell raw from processed
_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}
# What a record carries of the report (the rest stays in the probe file).
SUMMARY_KEYS = (
    "model",
    "model_served",
    "max_model_len",
    "token_ids",
    "prompt_ids",
    "logprobs",
    "token_names",
    "logprobs_mode",
    "temperature_gap",
    "tool_calling",
    "probed_at",
)


def _post(client: httpx.Client, path: str, body: dict, headers: dict[str, str]) -> tuple[int, Any]:
    response = client.post(path, content=orjson.dumps(body), headers={"content-type": "application/json", **headers})
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text[:500]


def _choice(payload: Any) -> dict:
    choices = payload.get("choices") if isinstance(payload, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _entries(payload: Any) -> list:
    logprobs = _choice(payload).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return content if isinstance(content, list) else []


def _served(client: httpx.Client, headers: dict[str, str], report: dict[str, Any]) -> None:
    response = client.get("/v1/models", headers=headers)
    data = response.json().get("data") if response.status_code == 200 else None
    models = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] if isinstance(data, list) else []
    report["served_models"] = [m["id"] for m in models]
    report["context_windows"] = {m["id"]: m["max_model_len"] for m in models if isinstance(m.get("max_model_len"), int)}


def _token_probe(client: httpx.Client, model: str, headers: dict[str, str], report: dict[str, Any]) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with the single word: ok"}],
        "max_tokens": 8,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": 1,
        "return_token_ids": True,
    }
    status, payload = _post(client, "/v1/chat/completions", body, headers)
    if status != 200 or not isinstance(payload, dict):
        report["errors"].append(f"token probe: HTTP {status}: {str(payload)[:300]}")
        return
    choice, entries = _choice(payload), _entries(payload)
    prompt = payload.get("prompt_token_ids", choice.get("prompt_token_ids"))
    report["prompt_ids"] = isinstance(prompt, list) and bool(prompt)
    report["token_ids"] = isinstance(choice.get("token_ids"), list) and bool(choice["token_ids"])
    report["logprobs"] = any(isinstance(e, dict) and isinstance(e.get("logprob"), int | float) for e in entries)
    first = entries[0].get("token") if entries and isinstance(entries[0], dict) else None
    if isinstance(first, str):
        report["token_names"] = "token_id" if first.startswith("token_id:") else "text"


def _gap(payload: Any) -> float | None:
    entries = _entries(payload)
    top = entries[0].get("top_logprobs") if entries and isinstance(entries[0], dict) else None
    values = sorted(
        (float(t["logprob"]) for t in top or () if isinstance(t, dict) and isinstance(t.get("logprob"), int | float)),
        reverse=True,
    )
    if len(values) < 2 or abs(values[1]) > SENTINEL:
        return None
    return values[0] - values[1]


def _mode_probe(client: httpx.Client, model: str, headers: dict[str, str], report: dict[str, Any]) -> None:
    gaps: list[float] = []
    for temperature in (COOL, HOT):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Reply with exactly: hello"}],
            "max_tokens": 1,
            "temperature": temperature,
            "logprobs": True,
            "top_logprobs": 5,
        }
        status, payload = _post(client, "/v1/chat/completions", body, headers)
        gap = _gap(payload) if status == 200 else None
        if gap is None:
            report["logprobs_mode"] = "unknown"
            if status != 200:
                report["errors"].append(f"temperature-gap probe: HTTP {status}: {str(payload)[:300]}")
            return
        gaps.append(round(gap, 6))
    report["temperature_gap"] = {"temperatures": [COOL, HOT], "gaps": gaps}
    if gaps[0] < FLAT:
        report["logprobs_mode"] = "unknown"
        return
    ratio = gaps[1] / gaps[0]
    report["temperature_gap"]["ratio"] = round(ratio, 4)
    # processed: the gap scales by COOL / HOT; raw: it does not move
    report["logprobs_mode"] = "raw" if abs(ratio - 1.0) < abs(ratio - COOL / HOT) else "processed"


def _tool_probe(client: httpx.Client, model: str, headers: dict[str, str], report: dict[str, Any]) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Use the bash tool to list the files in /tmp."}],
        "tools": [_TOOL],
        "tool_choice": "auto",
        "max_tokens": 256,
        "temperature": 1.0,
    }
    status, payload = _post(client, "/v1/chat/completions", body, headers)
    if status == 400:
        report["tool_calling"] = "rejected"
        report["errors"].append(f"tool probe: HTTP 400: {str(payload)[:300]}")
        return
    if status != 200:
        report["tool_calling"] = "unknown"
        report["errors"].append(f"tool probe: HTTP {status}: {str(payload)[:300]}")
        return
    choice = _choice(payload)
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    if message.get("tool_calls"):
        report["tool_calling"] = "ok"
    elif choice.get("finish_reason") == "length":  # cut before it decided: no evidence either way
        report["tool_calling"] = "unknown"
    else:
        report["tool_calling"] = "no-tool-call"


def _findings(report: dict[str, Any]) -> list[str]:
    out = []
    if report.get("model_served") is False:
        out.append(
            f"[FATAL] model_not_served: {report['model']!r} is not served here; served: {report['served_models']}"
        )
    if report.get("token_ids") is False or report.get("prompt_ids") is False:
        out.append(
            "[FATAL] no_token_ids: the engine returned no token ids for return_token_ids (vLLM >= 0.10.2 or "
            "SGLang from main): calls load as message-only, linked by their messages, nothing trainable"
        )
    if report.get("logprobs_mode") == "raw":
        gap = report.get("temperature_gap") or {}
        out.append(
            f"[WARN] raw_logprobs: measured RAW (pre-temperature) logprobs: the gap between the two likeliest first "
            f"tokens is {gap.get('gaps')} at T={COOL:g} and T={HOT:g}; a call sampled at any other temperature "
            "(or with top_p / top_k) records logprobs that are not its sampling distribution's (FATAL raw_logprobs "
            "on those calls). Restart vLLM with --logprobs-mode processed_logprobs"
        )
    if report.get("tool_calling") == "rejected":
        out.append(
            "[FATAL] no_tool_calling: the engine will not accept a tool manifest with tool_choice auto (vLLM: "
            "--enable-auto-tool-choice --tool-call-parser NAME); every agent harness sends one"
        )
    elif report.get("tool_calling") == "no-tool-call":
        out.append(
            "[WARN] no_tool_call_emitted: the engine accepted a tool manifest but answered in prose instead of "
            "calling the tool; agent rollouts may stall on the first turn"
        )
    return out


def probe_engine(
    base_url: str, model: str | None = None, timeout: float = 60.0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Ask the engine at ``base_url`` (without ``/v1``) the probes above; never raises.

    ``model``: the model to ask for (``--model``); by default the first the engine serves.
    """
    started = time.time()
    report: dict[str, Any] = {"engine": base_url, "probed_at": round(started, 3), "reachable": False, "errors": []}
    headers = headers or {}
    try:
        with httpx.Client(base_url=base_url, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))) as client:
            _served(client, headers, report)
            report["reachable"] = True
            served = report["served_models"]
            chosen = model or (served[0] if served else None)
            if chosen is None:
                report["errors"].append("the engine lists no model (GET /v1/models) and no --model was given")
            else:
                report["model"] = chosen
                report["model_served"] = chosen in served if served else None
                report["max_model_len"] = report["context_windows"].get(chosen)
                _token_probe(client, chosen, headers, report)
                if report.get("logprobs"):
                    _mode_probe(client, chosen, headers, report)
                _tool_probe(client, chosen, headers, report)
    except httpx.HTTPError as exc:
        report["errors"].append(f"{type(exc).__name__}: {str(exc)[:300]}")
    except ValueError as exc:  # an answer that is not JSON where JSON was due
        report["reachable"] = True
        report["errors"].append(f"an answer that is not JSON: {str(exc)[:300]}")
    report["findings"] = _findings(report)
    report["seconds"] = round(time.time() - started, 3)
    return report


def summary(report: dict[str, Any], probe_file: str | None = None) -> dict[str, Any]:
    """What every record carries of a probe report (``engine``): the answers, not the evidence."""
    out = {k: report[k] for k in SUMMARY_KEYS if report.get(k) is not None}
    if isinstance(out.get("temperature_gap"), dict):
        out["temperature_gap"] = out["temperature_gap"].get("gaps")
    if not report.get("reachable"):
        out["reachable"] = False
    if probe_file is not None:
        out["probe"] = probe_file
    return out


def write_report(report: dict[str, Any], path: Any) -> None:
    """The probe report as indented JSON at ``path`` (a ``capture-<time>.probe.json``)."""
    with open(path, "wb") as out:
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
