"""Run open-source agent harnesses headless against SmolLM2 through the capture proxy, and bundle
what they recorded in ``sample_traces/harnesses/``.

    engine (tools/harness_engine.py, vLLM-shaped, SmolLM2 on this CPU)
      <- rollout-graph capture --upstream ENGINE   (records token ids + logprobs per call)
        <- harness (opencode / codex / qwen-code / mini-swe-agent / Claude Code / gemini-cli), base URL = the proxy

Every harness works in a fresh copy of a tiny repository with a failing test (the one of
tools/make_sample_traces.py) on the same task. Its calls land in one rollout per harness: the
base URL carries ``/session/<harness>``. The first call of each conversation that offers a shell
tool is steered (see tools/harness_engine.py: the response says ``"steered"``); everything else
is the model's own output. Harnesses are installed outside the repository:

    npm install --prefix /work/harness_tools opencode-ai @openai/codex @qwen-code/qwen-code @google/gemini-cli
    python3 -m venv /work/harness_tools/msw && /work/harness_tools/msw/bin/pip install mini-swe-agent
    .venv/bin/python tools/run_harness_samples.py --tools /work/harness_tools [--only codex,opencode]

then ``--golden`` rewrites tests/golden/harness_samples.json from the bundled traces (the
findings, near-miss kinds and counts the tests assert).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

OUT = ROOT / "sample_traces" / "harnesses"
GOLDEN = ROOT / "tests" / "golden" / "harness_samples.json"
BREAKS = ROOT / "tests" / "golden" / "breaks.json"
FIXTURES = ROOT / "tests" / "fixtures"  # hand-made captures in real harnesses' shapes (make_break_fixtures.py)
MODEL_NAME = "SmolLM2-135M-Instruct"  # the engine's served name; also names the bundled tokenizer
TASK = "The test in tests/test_loader.py fails. Find out why and fix configlib/loader.py. Be brief."
FILES = {
    "README.md": "# configlib\nA tiny config loader.\n",
    "configlib/__init__.py": "from .loader import load_config\n",
    "configlib/loader.py": (
        "import json\n\n\ndef load_config(path):\n    with open(path) as f:\n        data = json.load(f)\n"
        "    return data['settings']\n"
    ),
    "tests/test_loader.py": (
        "from configlib import load_config\n\n\ndef test_missing_settings(tmp_path):\n"
        "    p = tmp_path / 'c.json'\n    p.write_text('{}')\n    assert load_config(p) == {}\n"
    ),
}
SHORT_SYSTEM = "You are a coding agent. Use the shell tool to inspect and fix the repository. Be brief."
KEY = "sk-local-not-a-real-key"  # harnesses insist on a key; the proxy never records auth headers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not come up in {seconds:.0f} s")


@contextlib.contextmanager
def process(argv: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    """A background process in its own group, stopped (the whole group) on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def workspace(base: Path) -> Path:
    repo = base / "repo"
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"], cwd=repo, check=True)
    return repo


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))}
    env.update(HOME=str(home), NO_COLOR="1", CI="1", **extra)
    return env


def qwen_code(
    tools: Path, url: str, repo: Path, home: Path, core_tools: list[str] | None = None
) -> tuple[list[str], dict]:
    # its user settings: no usage statistics (no network here: they queue and retry), and a request
    # timeout above the engine's slowest prompt (its default 120 s cancels a long prompt and re-sends it)
    settings: dict = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "model": {"generationConfig": {"timeout": 1_800_000}},
    }
    if core_tools is not None:
        settings["tools"] = {"core": core_tools}
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2))
    # its own system prompt is ~7k tokens: on this shared CPU SmolLM2 reads it at ~10 tokens/s
    argv = [str(tools / "node_modules/.bin/qwen"), TASK, "--yolo", "--auth-type", "openai",
            "--openai-base-url", f"{url}/v1", "--openai-api-key", KEY, "-m", MODEL_NAME,
            "--system-prompt", SHORT_SYSTEM]  # fmt: skip
    return argv, _env(home, OPENAI_MODEL=MODEL_NAME)


def qwen_code_token_limit(tools: Path, url: str, repo: Path, home: Path) -> tuple[list[str], dict]:
    """qwen-code offering only its shell tool (shorter prompts: faster here, a smaller file)."""
    return qwen_code(tools, url, repo, home, core_tools=["run_shell_command"])


def opencode(tools: Path, url: str, repo: Path, home: Path) -> tuple[list[str], dict]:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "local engine",
                "options": {"baseURL": f"{url}/v1", "apiKey": KEY},
                "models": {MODEL_NAME: {"name": "SmolLM2-135M-Instruct", "limit": {"context": 16384, "output": 48}}},
            }
        },
        "model": f"local/{MODEL_NAME}",
        "small_model": f"local/{MODEL_NAME}",
        "autoupdate": False,
        "share": "disabled",
    }
    (repo / "opencode.json").write_text(json.dumps(config, indent=2))
    argv = [str(tools / "node_modules/.bin/opencode"), "run", "--print-logs", "--log-level", "WARN", "--auto",
            "-m", f"local/{MODEL_NAME}", TASK]  # fmt: skip
    return argv, _env(home, OPENCODE_DISABLE_AUTOUPDATE="1")


def codex(tools: Path, url: str, repo: Path, home: Path) -> tuple[list[str], dict]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL_NAME}"\nmodel_provider = "local"\n\n[model_providers.local]\nname = "local engine"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_ENGINE_KEY"\n'
    )
    argv = [str(tools / "node_modules/.bin/codex"), "exec", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", TASK]  # fmt: skip
    return argv, _env(home, CODEX_HOME=str(codex_home), LOCAL_ENGINE_KEY=KEY)


def mini_swe_agent(tools: Path, url: str, repo: Path, home: Path) -> tuple[list[str], dict]:
    argv = [str(tools / "msw/bin/mini"), "-m", f"openai/{MODEL_NAME}", "-t", TASK, "-y", "--exit-immediately",
            "-l", "0", "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={url}/v1",
            "-c", "agent.step_limit=6", "-o", str(home / "trajectory.json")]  # fmt: skip
    return argv, _env(home, OPENAI_API_KEY=KEY, MSWEA_CONFIGURED="true", MSWEA_COST_TRACKING="ignore_errors")


def claude_code(tools: Path, url: str, repo: Path, home: Path) -> list[tuple[list[str], dict]]:
    """Claude Code (Anthropic Messages through the proxy) run twice in one directory: the task, then
    ``--continue`` (a new invocation resuming the saved session). No tools and a one-line system
    prompt: the break under test is the resume, and Claude Code's own prompts stay out of the file."""
    common = [str(tools / "node_modules/.bin/claude"), "-p", "--bare", "--model", MODEL_NAME,
              "--system-prompt", "You are a coding assistant. Answer briefly.", "--tools", "",
              "--output-format", "text"]  # fmt: skip
    env = _env(
        home,
        ANTHROPIC_BASE_URL=url,  # no /v1: Claude Code appends /v1/messages itself
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_MODEL=MODEL_NAME,
        ANTHROPIC_DEFAULT_HAIKU_MODEL=MODEL_NAME,
        ANTHROPIC_SMALL_FAST_MODEL=MODEL_NAME,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_MAX_OUTPUT_TOKENS="8000",
    )
    return [([*common, TASK], env), ([*common, "--continue", "Go on, briefly."], env)]


# -- recorded-traffic fixtures (issue 40): resumes, compactions and subagents of harnesses the
# tests had not seen, judged by hand (tests/fixtures/harnesses/README.md) ----------------------------

GO_ON = "Go on, briefly."
SUBAGENT_TASK = "List the files and say which one holds the loader."
PI_PROVIDER = "local"


def pi_agent(tools: Path, url: str, repo: Path, home: Path) -> list:
    """pi-coding-agent: its bash tool only and a one-line system prompt; a 640-token context window
    with 340 reserved, so it compacts (a summary call) once the conversation passes 300 tokens:
    the task, then ``--continue`` six times (a new invocation each, resuming the saved session)."""
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    models = {"providers": {PI_PROVIDER: {
        "baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": KEY,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": MODEL_NAME, "contextWindow": 640, "maxTokens": 64, "reasoning": False}],
    }}}  # fmt: skip
    (agent / "models.json").write_text(json.dumps(models, indent=2))
    settings = {"compaction": {"enabled": True, "reserveTokens": 340, "keepRecentTokens": 80}, "quietStartup": True}
    (agent / "settings.json").write_text(json.dumps(settings, indent=2))
    env = _env(home, PI_OFFLINE="1")
    common = [str(tools / "node_modules/.bin/pi"), "-p", "--provider", PI_PROVIDER, "--model", MODEL_NAME,
              "--tools", "bash", "--system-prompt", SHORT_SYSTEM, "--no-context-files", "--no-skills",
              "--no-extensions", "--no-prompt-templates"]  # fmt: skip
    return [([*common, TASK], env)] + [([*common, "--continue", GO_ON], env)] * 6


def _codex_home(home: Path, url: str, extra: str = "") -> Path:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "instructions.md").write_text(SHORT_SYSTEM + "\n")
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL_NAME}"\nmodel_provider = "local"\nmodel_instructions_file = "{codex_home / "instructions.md"}"\n'
        f'model_context_window = 8192\n{extra}\n[model_providers.local]\nname = "local engine"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_ENGINE_KEY"\n'
    )
    return codex_home


def codex_compact(tools: Path, url: str, repo: Path, home: Path) -> list:
    """codex with a short instructions file and ``model_auto_compact_token_limit`` low enough that
    the second turn compacts: the task, then ``codex exec resume --last`` twice."""
    codex_home = _codex_home(home, url, "model_auto_compact_token_limit = 1400\n")
    env = _env(home, CODEX_HOME=str(codex_home), LOCAL_ENGINE_KEY=KEY)
    exe = str(tools / "node_modules/.bin/codex")
    flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    return [([exe, "exec", *flags, TASK], env)] + [([exe, "exec", "resume", "--last", *flags, GO_ON], env)] * 3


def codex_subagents(tools: Path, url: str, repo: Path, home: Path) -> list:
    """codex with its multi-agent tools: the engine steers the first call of each conversation into
    ``spawn_agent`` (tools/harness_engine.py ``--steer-tool``), so a subagent spawns a subagent with
    the same prompt, as far as codex lets it."""
    codex_home = _codex_home(home, url, "[features]\nmulti_agent = true\n")
    env = _env(home, CODEX_HOME=str(codex_home), LOCAL_ENGINE_KEY=KEY)
    exe = str(tools / "node_modules/.bin/codex")
    return [([exe, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK], env)]


def qwen_continue(tools: Path, url: str, repo: Path, home: Path) -> list:
    """qwen-code offering its shell tool only, its chat compression set to start at 2% of the
    context: the task, then ``--continue`` twice (a new invocation resuming the saved session)."""
    argv, env = qwen_code(tools, url, repo, home, core_tools=["run_shell_command"])
    settings = json.loads((home / ".qwen" / "settings.json").read_text())
    settings["model"]["chatCompression"] = {"contextPercentageThreshold": 0.02}
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2))
    again = [a if a != TASK else GO_ON for a in argv] + ["--continue"]
    return [(argv, env), (again, env), (again, env)]


def claude_compact(tools: Path, url: str, repo: Path, home: Path) -> list:
    """Claude Code as the bundled sample, then ``--continue /compact`` and ``--continue`` again."""
    first, second = claude_code(tools, url, repo, home)
    argv, env = second
    compact = [a if a != "Go on, briefly." else "/compact" for a in argv]
    return [first, second, (compact, env), (argv, env)]


def opencode_subagent(tools: Path, url: str, repo: Path, home: Path) -> list:
    """opencode (its config as the bundled sample's): the engine steers the first call into its
    ``task`` tool (a subagent), then ``opencode run --continue``."""
    argv, env = opencode(tools, url, repo, home)
    again = [a if a != TASK else GO_ON for a in argv]
    return [(argv, env), (again[:2] + ["--continue"] + again[2:], env)]


def cline_resume(tools: Path, url: str, repo: Path, home: Path) -> list:
    """cline's CLI with an OpenAI-compatible provider and a one-line system prompt: the task, then
    the same session resumed by id (``--id``, read from ``cline history --json``)."""
    exe = str(tools / "node_modules/.bin/cline")
    config = home / ".cline"
    env = _env(home)
    auth = [exe, "auth", "-p", "openai", "-k", KEY, "-m", MODEL_NAME, "-b", f"{url}/v1", "--config", str(config)]
    run = [exe, "-P", "openai", "-m", MODEL_NAME, "-s", SHORT_SYSTEM, "--config", str(config), "--retries", "2"]

    def resume() -> tuple[list[str], dict]:
        done = subprocess.run([exe, "history", "--json", "--config", str(config)], capture_output=True, text=True,
                              env=env, cwd=repo, timeout=120)  # fmt: skip
        ids = [m for m in __import__("re").findall(r'"id"\s*:\s*"([^"]+)"', done.stdout)]
        return ([*run, "--id", ids[0], GO_ON] if ids else [*run, GO_ON]), env

    return [(auth, env), ([*run, TASK], env), resume]


def continue_cn(tools: Path, url: str, repo: Path, home: Path) -> list:
    """Continue's ``cn`` with a local config (an ``openai`` provider): the task, then ``--resume``."""
    config = home / ".continue" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "name: local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: smol\n    provider: openai\n"
        f"    model: {MODEL_NAME}\n    apiBase: {url}/v1\n    apiKey: {KEY}\n    roles: [chat, edit, apply]\n"
    )
    exe = str(tools / "node_modules/.bin/cn")
    env = _env(home, CONTINUE_GLOBAL_DIR=str(config.parent))
    common = [exe, "-p", "--config", str(config), "--auto", "--rule", SHORT_SYSTEM]
    return [([*common, TASK], env), ([*common, "--resume", GO_ON], env)]


def aider_history(tools: Path, url: str, repo: Path, home: Path) -> list:
    """aider with a small chat-history budget (it summarises old messages with a call of its own):
    three messages, each a new invocation restoring the chat history."""
    exe = str(tools / "aider/bin/aider")
    env = _env(home, OPENAI_API_BASE=f"{url}/v1", OPENAI_API_KEY=KEY, AIDER_ANALYTICS="false")
    common = [exe, "--model", f"openai/{MODEL_NAME}", "--yes-always", "--no-git", "--map-tokens", "0",
              "--max-chat-history-tokens", "200", "--restore-chat-history", "--no-show-model-warnings",
              "--no-check-update", "--no-analytics", "--no-stream", "--edit-format", "whole", "--no-pretty",
              "--no-fancy-input", "--weak-model", f"openai/{MODEL_NAME}"]  # fmt: skip
    return [([*common, "--message", TASK], env), ([*common, "--message", GO_ON], env),
            ([*common, "--message", "And the test?"], env)]  # fmt: skip


def gemini_cli(tools: Path, url: str, repo: Path, home: Path) -> tuple[list[str], dict]:
    """gemini-cli (the Gemini API through the proxy): a dummy API key (sent as x-goog-api-key, never
    recorded), no folder-trust prompt, no telemetry or update check, only its shell tool offered and
    a one-line system prompt (GEMINI_SYSTEM_MD): its own prompt and tool list (about 10k tokens) do
    not fit SmolLM2's 8k context."""
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "tools": {"core": ["run_shell_command"]},
    }
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    (home / "system.md").write_text(SHORT_SYSTEM + "\n")
    env = _env(home, GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=url, GEMINI_SYSTEM_MD=str(home / "system.md"))
    return [str(tools / "node_modules/.bin/gemini"), "-p", TASK, "-m", MODEL_NAME, "--yolo"], env


def gemini_resume(tools: Path, url: str, repo: Path, home: Path) -> list:
    """gemini-cli as its bundled sample, its chat compression set to start at 2% of the context:
    the task, then ``--resume latest`` twice (a new invocation resuming the saved session)."""
    argv, env = gemini_cli(tools, url, repo, home)
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    settings["model"] = {"chatCompression": {"contextPercentageThreshold": 0.02}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    again = [a if a != TASK else GO_ON for a in argv] + ["--resume", "latest"]
    return [(argv, env), (again, env), (again, env)]


# -- held-out set 3 (recorded after sets 1-2's fixes; labelled before the classifier read them) -----


def opencode_compact(tools: Path, url: str, repo: Path, home: Path) -> list:
    """opencode as its bundled sample but with a 2,500-token context limit (48 for output), below
    the ~2,600 tokens of its first turn, the engine steering nothing (``--first-command ""``): the
    task, then ``opencode run --continue`` twice. Recorded: opencode compacts after the first reply
    (its summary call, then the conversation carried on from the summary), and as every reply is
    cut at the engine's cap (finish ``length``) the turn goes on, overflows again and compacts
    again without end; the recording was stopped by hand after 14 calls (the two ``--continue``
    invocations killed before they made a call). Steered into ``ls`` it loops the same way."""
    argv, env = opencode(tools, url, repo, home)
    config = json.loads((repo / "opencode.json").read_text())
    config["provider"]["local"]["models"][MODEL_NAME]["limit"] = {"context": 2500, "output": 48}
    (repo / "opencode.json").write_text(json.dumps(config, indent=2))
    again = [a if a != TASK else GO_ON for a in argv]
    resumed = again[:2] + ["--continue"] + again[2:]
    return [(argv, env), (resumed, env), (resumed, env)]


def cn_compact(tools: Path, url: str, repo: Path, home: Path) -> list:
    """Continue's ``cn`` as ``cn-resume`` but with a 1,680-token ``contextLength`` and 48 ``maxTokens``:
    its first request (1,286 tokens by its own count) fits, and its auto-compaction threshold
    (context - max tokens - a 20% buffer: 1,305) is passed once the conversation grows: the task,
    then ``--resume`` twice. (At 1,000 it refused every request: "Context length exceeded".)
    Recorded: each compaction is a summary request in the conversation, then the summary alone as
    the history; its reply cut at the engine's cap, cn says "continue" and compacts again, so the
    third invocation was stopped by hand after 10 calls."""
    config = home / ".continue" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "name: local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: smol\n    provider: openai\n"
        f"    model: {MODEL_NAME}\n    apiBase: {url}/v1\n    apiKey: {KEY}\n    roles: [chat, edit, apply]\n"
        "    defaultCompletionOptions:\n      contextLength: 1680\n      maxTokens: 48\n"
    )
    exe = str(tools / "node_modules/.bin/cn")
    env = _env(home, CONTINUE_GLOBAL_DIR=str(config.parent))
    common = [exe, "-p", "--config", str(config), "--auto", "--rule", SHORT_SYSTEM]
    return [([*common, TASK], env), ([*common, "--resume", GO_ON], env), ([*common, "--resume", "And the test?"], env)]


def qwen_subagent(tools: Path, url: str, repo: Path, home: Path) -> list:
    """qwen-code offering its shell tool and its ``agent`` tool (subagents), the engine steering the
    first call into ``agent`` with no ``subagent_type`` (qwen-code's implicit fork: a subagent that
    inherits the whole conversation), then ``--continue``."""
    argv, env = qwen_code(tools, url, repo, home, core_tools=["run_shell_command", "agent"])
    again = [a if a != TASK else GO_ON for a in argv] + ["--continue"]
    return [(argv, env), (again, env)]


def codex_compact_low(tools: Path, url: str, repo: Path, home: Path) -> list:
    """``codex-compact`` with ``model_auto_compact_token_limit = 1150``: its turns there reached
    1,081-1,247 tokens and never passed 1,400, so the limit sits below the second turn's total.
    Recorded: the resume compacts before its turn, then again after every steered tool step (its
    summary request, then the compacted window), so the second invocation was stopped by hand
    after 11 calls (its last three, the same request cut off, have no response) and the last two
    before they made one."""
    codex_home = _codex_home(home, url, "model_auto_compact_token_limit = 1150\n")
    env = _env(home, CODEX_HOME=str(codex_home), LOCAL_ENGINE_KEY=KEY)
    exe = str(tools / "node_modules/.bin/codex")
    flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    return [([exe, "exec", *flags, TASK], env)] + [([exe, "exec", "resume", "--last", *flags, GO_ON], env)] * 3


@dataclass(frozen=True)
class Scenario:
    """One bundled sample: how to run the harness, its package, and the engine's cap on every
    reply for it (None: ``--max-tokens``)."""

    build: Callable[[Path, str, Path, Path], object]
    package: str
    version_of: str  # the harness whose version is reported
    engine_cap: int | None = None
    engine_args: tuple[str, ...] = ()  # more tools/harness_engine.py options
    fixture: str | None = None  # a recorded-traffic fixture (tests/fixtures/harnesses/): "tuning" or "held-out"


HARNESSES = {
    "mini-swe-agent": Scenario(mini_swe_agent, "mini-swe-agent (PyPI)", "mini-swe-agent"),
    "qwen-code": Scenario(qwen_code, "@qwen-code/qwen-code (npm)", "qwen-code"),
    "opencode": Scenario(opencode, "opencode-ai (npm)", "opencode"),
    "codex": Scenario(codex, "@openai/codex (npm)", "codex"),
    # qwen-code again, the engine capping every reply at 12 tokens and steering nothing: the first
    # reply is cut, the escalated re-send (64k max tokens) is cut too, so it replays each cut reply
    # as text plus "Output token limit hit. Resume directly ..." (3 times: the replay chain of
    # docs/semantics.md, "Why a call broke"); the engine ends the third recovery at the cap
    # (--cut-replies 4), so the turn finishes without a tool call and qwen-code runs its
    # memory-extraction agent (its own system prompt and tools, the history in its context)
    "qwen-code-token-limit": Scenario(
        qwen_code_token_limit,
        "@qwen-code/qwen-code (npm)",
        "qwen-code",
        engine_cap=12,
        engine_args=("--cut-replies", "4", "--first-command", ""),
    ),
    # Claude Code's print mode, then --continue in the same directory: the resume drops the
    # "Output token limit hit" recovery messages of the first run
    "claude-code-continue": Scenario(claude_code, "@anthropic-ai/claude-code (npm)", "claude-code", engine_cap=12),
    # recorded traffic for the near-miss classifier (tests/fixtures/harnesses/): the tuning set ...
    "pi-compact": Scenario(pi_agent, "@mariozechner/pi-coding-agent (npm)", "pi", engine_cap=24, fixture="tuning"),
    "codex-compact": Scenario(codex_compact, "@openai/codex (npm)", "codex", engine_cap=24, fixture="tuning"),
    "codex-subagents": Scenario(
        codex_subagents,
        "@openai/codex (npm)",
        "codex",
        engine_cap=24,
        fixture="tuning",
        engine_args=("--steer-tool", "spawn_agent", "--steer-arguments", json.dumps({"message": SUBAGENT_TASK})),
    ),  # fmt: skip
    "qwen-code-continue": Scenario(
        qwen_continue, "@qwen-code/qwen-code (npm)", "qwen-code", engine_cap=24, fixture="tuning"
    ),  # fmt: skip
    "claude-code-compact": Scenario(
        claude_compact, "@anthropic-ai/claude-code (npm)", "claude-code", engine_cap=24, fixture="tuning"
    ),  # fmt: skip
    # ... and the held-out set (never tuned on; judged before the classifier's output was read)
    "opencode-subagent": Scenario(
        opencode_subagent,
        "opencode-ai (npm)",
        "opencode",
        engine_cap=24,
        fixture="held-out",
        engine_args=("--steer-tool", "task"),
    ),  # fmt: skip
    "cline-resume": Scenario(cline_resume, "cline (npm)", "cline", engine_cap=24, fixture="held-out"),
    "cn-resume": Scenario(continue_cn, "@continuedev/cli (npm)", "cn", engine_cap=24, fixture="held-out"),
    "aider-history": Scenario(aider_history, "aider-chat (PyPI)", "aider", engine_cap=24, fixture="held-out"),
    # a second held-out set, recorded and labelled before the classifier saw the first one's failures
    "gemini-cli-resume": Scenario(
        gemini_resume, "@google/gemini-cli (npm)", "gemini-cli", engine_cap=24, fixture="held-out"
    ),  # fmt: skip
    # a third held-out set, recorded after the second one's fixes: compactions at a small context
    "opencode-compact": Scenario(
        opencode_compact,
        "opencode-ai (npm)",
        "opencode",
        engine_cap=24,
        fixture="held-out",
        engine_args=("--first-command", ""),
    ),  # fmt: skip
    "cn-compact": Scenario(cn_compact, "@continuedev/cli (npm)", "cn", engine_cap=24, fixture="held-out"),
    "qwen-code-subagent": Scenario(
        qwen_subagent,
        "@qwen-code/qwen-code (npm)",
        "qwen-code",
        engine_cap=24,
        fixture="held-out",
        engine_args=(
            "--steer-tool",
            "agent",
            "--steer-arguments",
            json.dumps({"description": "Find the loader", "prompt": SUBAGENT_TASK}),
        ),
    ),  # fmt: skip
    "codex-compact-1150": Scenario(
        codex_compact_low, "@openai/codex (npm)", "codex", engine_cap=24, fixture="held-out"
    ),  # fmt: skip
    # the Gemini API (streamGenerateContent?alt=sse) through the proxy, translated to chat completions
    "gemini-cli": Scenario(gemini_cli, "@google/gemini-cli (npm)", "gemini-cli"),
}
FIXTURE_SCENARIOS = [name for name, scenario in HARNESSES.items() if scenario.fixture]
HARNESS_FIXTURES = ROOT / "tests" / "fixtures" / "harnesses"  # <harness>-<version>/<scenario>.jsonl.gz


def version_of(name: str, tools: Path) -> str:
    argv = {
        "mini-swe-agent": [str(tools / "msw/bin/python"), "-c", "import minisweagent; print(minisweagent.__version__)"],
        "qwen-code": [str(tools / "node_modules/.bin/qwen"), "--version"],
        "opencode": [str(tools / "node_modules/.bin/opencode"), "--version"],
        "codex": [str(tools / "node_modules/.bin/codex"), "--version"],
        "claude-code": [str(tools / "node_modules/.bin/claude"), "--version"],
        "pi": [str(tools / "node_modules/.bin/pi"), "--version"],
        "cline": [str(tools / "node_modules/.bin/cline"), "--version"],
        "cn": [str(tools / "node_modules/.bin/cn"), "--version"],
        "aider": [str(tools / "aider/bin/aider"), "--version"],
        "gemini-cli": [str(tools / "node_modules/.bin/gemini"), "--version"],
    }[HARNESSES[name].version_of]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        out = (done.stdout.strip() or done.stderr.strip()).splitlines()  # (pi prints it on stderr)
        return out[-1] if out else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def run_one(name: str, tools: Path, engine_url: str, base: Path, timeout: float) -> dict:
    """Run one scenario through a fresh capture proxy (every invocation of it, in order, in one
    directory and one rollout); returns what happened (for the README)."""
    work = base / name
    home = work / "home"
    home.mkdir(parents=True)
    repo = workspace(work)
    captures = work / "captures"
    port = free_port()
    proxy = [sys.executable, "-m", "rollout_graph", "capture", "--upstream", engine_url, "--out", str(captures),
             "--port", str(port), "--harness", name, "--drain", "5", "--timeout", "1800"]  # fmt: skip
    codes: list[int | str] = []
    started = time.time()
    with process(proxy, work / "proxy.log"):
        wait_for(f"http://127.0.0.1:{port}/v1/models", 900)  # the proxy probes the engine first (docs/live.md)
        built = HARNESSES[name].build(tools, f"http://127.0.0.1:{port}/session/{name}", repo, home)
        steps = built if isinstance(built, list) else [built]
        with open(work / "harness.log", "wb") as log:
            for step in steps:
                argv, env = step() if callable(step) else step  # (a step may depend on the ones before)
                env["PWD"] = str(repo)  # bun-based harnesses (opencode) find their project by $PWD
                log.write(f"$ {' '.join(argv)}\n".encode())
                log.flush()
                proc = subprocess.Popen(argv, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
                try:
                    codes.append(proc.wait(timeout))
                except subprocess.TimeoutExpired:
                    codes.append(f"stopped after {timeout:.0f} s")
                stop(proc)
        seconds = time.time() - started
    records = [line for f in sorted(captures.glob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()]
    code = codes[0] if len(codes) == 1 else codes
    return {"harness": name, "exit": code, "seconds": round(seconds), "records": records, "log": work / "harness.log"}


def steered(record: dict) -> str | None:
    response = record.get("response")
    if isinstance(response, list):
        response = response[0] if response and isinstance(response[0], dict) else {}
    return response.get("steered") if isinstance(response, dict) else None


def write_trace(name: str, records: list[str], version: str = "") -> Path:
    """A bundled sample (sample_traces/harnesses/), or a recorded-traffic fixture in the folder of
    its harness and version (tests/fixtures/harnesses/<harness>-<version>/)."""
    scenario = HARNESSES[name]
    if scenario.fixture:
        found = re.search(r"\d+(?:\.\d+)+", version or "")
        number = found.group(0) if found else "unknown"
        folder = HARNESS_FIXTURES / f"{scenario.version_of}-{number}"
    else:
        folder = OUT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for line in records:
            f.write(line + "\n")
    return path


def golden() -> dict:
    """Per bundled harness trace: calls, structure, near-miss kinds and finding codes."""
    from rollout_graph.analysis.decode import decoder_for
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse

    out = {}
    for path in sorted(OUT.glob("*.jsonl.gz")):
        loaded = load_paths([path])
        for sid, session in sorted(loaded.sessions.items()):
            r = analyse(session, decoder=decoder_for(session.calls, [path]))
            s = r.stats
            out[f"{path.name}:{sid}"] = {
                "records": loaded.records,
                "skipped": len(loaded.skipped),
                "stats": {
                    k: s[k]
                    for k in (
                        "n_turns",
                        "n_roots",
                        "n_forks",
                        "n_discarded",
                        "n_leaves",
                        "n_discarded_retries",
                        "n_broken_replays",
                        "n_unfinished",
                    )
                },  # fmt: skip
                "near_miss_kinds": dict(sorted(Counter(m.kind for m in r.near_misses.values()).items())),
                "findings": dict(sorted(Counter(f"{f.level} {f.code}" for f in r.findings).items())),
            }
    return out


def break_files() -> list[Path]:
    """The traces whose breaks tests/golden/breaks.json records: the bundled real-harness samples,
    then the hand-made fixtures in the same shapes."""
    return [*sorted(OUT.glob("*.jsonl.gz")), *sorted(FIXTURES.glob("*.jsonl"))]


def breaks(path: Path, decoder=None) -> dict[str, dict]:
    """Per rollout of ``path``: every call that starts a root, a branch of a fork, is discarded or
    has a near miss, with its place in the graph, the one classifier's cause (near-miss kind) and
    the call it is named against; and the rollout's findings (level and code, sorted)."""
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse

    out: dict[str, dict] = {}
    for sid, session in sorted(load_paths([path]).sessions.items()):
        r = analyse(session, decoder=decoder)
        t = r.topology
        branches = {child for fork in t.forks for child in sorted(t.children[fork])[1:]}
        calls: dict[str, dict] = {}
        for i, call in enumerate(r.calls):
            miss = r.near_misses.get(i)
            place = (
                "discarded" if i in t.discarded
                else "root" if t.parents[i] is None
                else "branch" if i in branches
                else "child"
            )  # fmt: skip
            replaced = r.replaced_by.get(i)
            if miss is None and replaced is None and place == "child":
                continue
            entry: dict = {"place": place, "cause": miss.kind if miss else None}
            if miss is not None:
                entry["of"] = r.calls[miss.earlier].node_id  # always a call that arrived before it
            if replaced is not None:  # the later call that replaced it (re-sent, replayed, ...)
                entry["replaced_by"] = {"by": r.calls[replaced.later].node_id, "kind": replaced.kind}
            if miss is None:  # the earlier end of later calls' near misses
                named = sorted(r.calls[k].node_id for k, m in r.near_misses.items() if m.earlier == i)
                if named:
                    entry["named_by"] = named
            codes = sorted({f.code for f in r.findings if f.node_id == call.node_id})
            if codes:
                entry["findings"] = codes
            calls[call.node_id] = entry
        out[sid] = {"calls": calls, "findings": sorted(f"{f.level} {f.code}" for f in r.findings)}
    return out


def labelled_captures(split: str | None = None) -> list[tuple[Path, Path]]:
    """(capture, labels) for every recorded-traffic fixture with a labels file beside it
    (tests/fixtures/harnesses/<harness>-<version>/<scenario>.labels.json), of one split or all."""
    out = []
    for labels in sorted(HARNESS_FIXTURES.glob("*/*.labels.json")):
        capture = labels.with_name(labels.name.replace(".labels.json", ".jsonl.gz"))
        if capture.exists() and (split is None or json.loads(labels.read_text())["split"] == split):
            out.append((capture, labels))
    return out


def classifier_kinds(rollout) -> dict[str, tuple[str, str]]:
    """Each call's break as the classifier names it: (kind, the earlier call), keyed by the call that
    broke (the later one). Read from any near miss whose later end is the call, so the code before
    issue 40 (which kept some near misses under the earlier call) is scored the same way."""
    calls, out = rollout.calls, {}
    misses = sorted(rollout.near_misses.items())
    for node, m in misses:  # a near miss kept under its later call first
        if node == m.later:
            out[calls[m.later].node_id] = (m.kind, calls[m.earlier].node_id)
    for node, m in misses:  # then one kept under its earlier call (the old direction)
        if node != m.later:
            out.setdefault(calls[m.later].node_id, (m.kind, calls[m.earlier].node_id))
    return out


def score(capture: Path, labels_path: Path) -> dict:
    """The classifier against the hand labels of one capture: per labelled call the label, what the
    classifier says, and whether the kinds agree (a call the classifier leaves unnamed is ``none``)."""
    from rollout_graph.ingest.load.files import load_paths
    from rollout_graph.pipeline import analyse

    labels = json.loads(labels_path.read_text())
    named: dict[str, tuple[str, str]] = {}
    for session in load_paths([capture]).sessions.values():
        named.update(classifier_kinds(analyse(session)))
    rows = []
    for call, label in labels["calls"].items():
        kind, of = named.get(call, ("none", None))
        rows.append({"call": call, "label": label["kind"], "label_of": label.get("of"), "kind": kind, "of": of,
                     "agree": kind == label["kind"]})  # fmt: skip
    return {"capture": capture.relative_to(ROOT).as_posix(), "split": labels["split"], "rows": rows,
            "agree": sum(r["agree"] for r in rows), "total": len(rows)}  # fmt: skip


def breaks_golden() -> dict:
    return {path.relative_to(ROOT).as_posix(): breaks(path) for path in break_files()}


def write_golden() -> None:
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(golden(), indent=2) + "\n")
    BREAKS.write_text(json.dumps(breaks_golden(), indent=2, ensure_ascii=False) + "\n")
    print(f"golden -> {GOLDEN.relative_to(ROOT)}, {BREAKS.relative_to(ROOT)}")


def default_engine_python(tools: Path) -> str:
    """The engine's interpreter: the harness tools' ``engine`` venv when there is one (it holds
    llama-cpp-python and the model), else this one."""
    venv = tools / "engine" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


@contextlib.contextmanager
def engine(python: str, cap: int, extra: tuple[str, ...], base: Path, external: str | None) -> Iterator[str]:
    """A running engine capping every reply at ``cap`` tokens (or the ``--engine`` one); yields its URL."""
    if external:
        yield external
        return
    port = free_port()
    argv = [python, str(ROOT / "tools" / "harness_engine.py"), "--port", str(port), "--max-tokens", str(cap), *extra]
    with process(argv, base / f"engine-{cap}{''.join(extra).replace('-', '')}.log"):
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/v1/models", 600)
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tools", type=Path, default=Path("/work/harness_tools"), help="where the harnesses are installed"
    )
    parser.add_argument("--only", default=",".join(n for n in HARNESSES if n not in FIXTURE_SCENARIOS),
                        help="comma-separated scenario names (default: the bundled samples; the recorded-traffic "
                        f"fixtures are {', '.join(FIXTURE_SCENARIOS)})")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900, help="seconds per harness invocation")
    parser.add_argument("--max-tokens", type=int, default=48, help="the engine's cap on every reply (default 48); "
                        "scenarios with a cap of their own (qwen-code-token-limit, claude-code-continue: 12) keep it")  # fmt: skip
    parser.add_argument("--engine-python", help="interpreter for tools/harness_engine.py (default: TOOLS/engine/bin/python "
                        "when it exists, else this one)")  # fmt: skip
    parser.add_argument("--golden", action="store_true", help="only rewrite the golden files from the bundled traces")
    parser.add_argument("--score", choices=["tuning", "held-out", "all"], help="only print the classifier's agreement "
                        "with the hand labels of the recorded-traffic fixtures (tests/fixtures/harnesses/)")  # fmt: skip
    parser.add_argument(
        "--engine", help="use this running engine (e.g. tests/support/fake_upstream.py) and write no traces"
    )
    args = parser.parse_args()
    if args.score:
        for capture, labels in labelled_captures(None if args.score == "all" else args.score):
            result = score(capture, labels)
            print(f"{result['capture']} ({result['split']}): {result['agree']} of {result['total']} breaks named right")
            for row in result["rows"]:
                mark = "  " if row["agree"] else "✗ "
                print(
                    f"  {mark}{row['call']}: labelled {row['label']} (of {row['label_of']}), named {row['kind']} (of {row['of']})"
                )
        return
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in HARNESSES]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)} (known: {', '.join(HARNESSES)})")
    if not args.golden:
        base = Path(tempfile.mkdtemp(prefix="harness-samples-"))
        python = args.engine_python or default_engine_python(args.tools)
        results = []
        by_engine: dict[tuple[int, tuple[str, ...]], list[str]] = {}
        for name in names:
            scenario = HARNESSES[name]
            by_engine.setdefault((scenario.engine_cap or args.max_tokens, scenario.engine_args), []).append(name)
        for (cap, extra), group in by_engine.items():
            with engine(python, cap, extra, base, args.engine) as engine_url:
                for name in group:
                    result = run_one(name, args.tools, engine_url, base, args.timeout)
                    result["version"] = version_of(name, args.tools)
                    result["engine_cap"] = cap
                    parsed = [json.loads(line) for line in result["records"]]
                    result["steered"] = sum(1 for r in parsed if steered(r))
                    if parsed and not args.engine:
                        write_trace(name, result["records"], result["version"])
                    tail = result["log"].read_text(errors="replace")[-600:]
                    print(f"{name} {result['version']}: exit {result['exit']} in {result['seconds']} s, "
                          f"{len(parsed)} calls ({result['steered']} steered)\n{tail}", flush=True)  # fmt: skip
                    results.append({k: v for k, v in result.items() if k not in ("records", "log")})
        (base / "results.json").write_text(json.dumps(results, indent=2, default=str))
        print(f"work files in {base}")
    if args.engine:
        return
    write_golden()


if __name__ == "__main__":
    main()
