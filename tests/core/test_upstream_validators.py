"""The validators OpenEnv 0.10's capture proxy runs, as findings (docs/semantics.md, "Findings"):
each one on the turns that raise it and the turns that do not, and checked against OpenEnv's own
``validate.py`` on the same turns (its functions run as shipped, loaded from the installed wheel,
here or in the writers' venv of tests/conformance/writers.py, without importing the rest of the
package). Without OpenEnv those comparisons skip (fail under ROLLOUT_GRAPH_REQUIRE_WRITERS=1)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rollout_graph.core.findings import row_findings, row_shape
from rollout_graph.core.records import Call, SessionInput
from rollout_graph.pipeline import analyse
from tests.support.builders import Turn, message_only, rollout_of, trace_entry, vllm_chat

ROW_CODES = {"length_mismatch", "invalid_loss_mask", "trainable_prompt"}
SEQUENCE_CODES = {"empty_response", "certain_tokens", "nothing_trainable", "masked_has_logprob", "positive_logprob"}


def _call(i: int, prompt: list[int], sampled: list[int], logprobs: list[float] | None = None, **fields) -> Call:
    call = Call(
        node_id=f"n{i}",
        session_id="s",
        source="mem",
        line=i + 1,
        shape="test",
        prompt_ids=np.array(prompt, dtype=np.int32),
        sampled_ids=np.array(sampled, dtype=np.int32),
        sampled_logprobs=np.array(logprobs if logprobs is not None else [-0.5] * len(sampled)),
    )
    for name, value in fields.items():
        setattr(call, name, value)
    return call


def _codes(rollout, node_id: str | None = None) -> set[str]:
    return {f.code for f in rollout.findings if node_id is None or f.node_id == node_id}


def test_the_training_row_checks_follow_openenv_validate_training_turn():
    good = row_shape(5, [0, 0, 0, 1, 1], 5, 3)
    assert row_findings(good, "n") == []
    assert [f.code for f in row_findings(row_shape(5, [1, 1], 5, 3), "n")] == ["length_mismatch"]
    assert [f.code for f in row_findings(row_shape(5, [0, 0, 0, 2, 1], 5, 3), "n")] == ["invalid_loss_mask"]
    assert [f.code for f in row_findings(row_shape(5, [0, 0, 0, 1.0, 1], 5, 3), "n")] == ["invalid_loss_mask"]
    assert [f.code for f in row_findings(row_shape(5, [0, 1, 0, 1, 1], 5, 3), "n")] == ["trainable_prompt"]
    assert all(f.level == "FATAL" for f in row_findings(row_shape(5, [1], 5, 3), "n"))


@pytest.mark.parametrize(
    ("mask", "code"),
    [
        (lambda t: [0] * len(t.prompt) + [1] * len(t.sampled), None),
        (lambda t: [1] * len(t.sampled), "length_mismatch"),  # the completion only: OpenEnv refuses it
        (lambda t: [0] * len(t.prompt) + [3] * len(t.sampled), "invalid_loss_mask"),
        (lambda t: [1] * len(t.prompt) + [1] * len(t.sampled), "trainable_prompt"),
    ],
)
def test_a_trace_entrys_loss_mask_is_checked_as_a_training_row(mask, code):
    turn = Turn("c0", [1, 2, 3], [4, 5])
    entry = {**trace_entry(turn), "loss_mask": mask(turn)}
    rollout = rollout_of([entry])
    found = _codes(rollout, "c0") & ROW_CODES
    assert found == ({code} if code else set())


def test_a_rollout_documents_rows_are_checked():
    document = {
        "session_id": "doc",
        "turns": [{"node_id": "a", "n_prompt": 2, "n_sampled": 2}, {"node_id": "b", "n_prompt": 2, "n_sampled": 1}],
        "sequences": [
            {
                "node_ids": ["a"],
                "input_ids": [1, 2, 3, 4],
                "loss_mask": [0, 0, 1, 1],
                "logprobs": [0, 0, -1, -1],
                "prompt_len": 2,
            },
            {
                "node_ids": ["b"],
                "input_ids": [1, 2, 5],
                "loss_mask": [1, 0, 1],
                "logprobs": [0, 0, -1],
                "prompt_len": 2,
            },
        ],
    }
    rollout = rollout_of([document])
    rows = [(f.code, f.leaf_id) for f in rollout.findings if f.code in ROW_CODES]
    assert rows == [("trainable_prompt", "b")]


def test_empty_completion_is_a_turn_with_no_text_and_no_tool_call():
    empty = Turn("c0", None, [], reply="  ")
    said = Turn("c1", None, [], reply="ok", messages=[{"role": "user", "content": "other"}])
    rollout = rollout_of([message_only(empty), message_only(said)])
    assert "empty_completion" in _codes(rollout, "c0") and "empty_completion" not in _codes(rollout, "c1")
    (finding,) = [f for f in rollout.findings if f.code == "empty_completion"]
    assert finding.level == "WARN"


def test_certain_tokens_all_zero_is_a_warn_some_zero_an_info_per_row():
    calls = [
        _call(0, [1, 2], [3, 4, 5], [0.0, 0.0, 0.0]),  # forced or cached: every logprob 0
        _call(1, [1, 2, 3, 4, 5, 6], [7, 8], [0.0, -0.7]),  # one certain token in a real sample
        _call(2, [90], [91, 92], [-0.1, -0.2]),  # nothing certain
    ]
    rollout = analyse(SessionInput("s", calls))
    warn = [f for f in rollout.findings if f.code == "certain_tokens" and f.level == "WARN"]
    assert [f.node_id for f in warn] == ["n0"]
    info = [f for f in rollout.findings if f.code == "certain_tokens" and f.level == "INFO"]
    assert [(f.leaf_id, f.detail.split(" ")[0]) for f in info] == [("n1", "4/5")]


def test_empty_response_is_a_row_without_one_sampled_token():
    rollout = analyse(SessionInput("s", [_call(0, [1, 2], []), _call(1, [7, 8], [9])]))
    empty = [f for f in rollout.findings if f.code == "empty_response"]
    assert [(f.level, f.leaf_id) for f in empty] == [("FATAL", "n0")]


def test_forks_are_counted_once_per_rollout():
    calls = [_call(0, [1], [2]), _call(1, [1, 2, 3], [4]), _call(2, [1, 2, 3], [5]), _call(3, [1, 2, 3, 5, 6], [7])]
    rollout = analyse(SessionInput("s", calls))
    (forks,) = [f for f in rollout.findings if f.code == "forks"]
    assert forks.level == "INFO" and forks.detail.startswith("1 fork point")
    assert "forks" not in _codes(analyse(SessionInput("s", calls[:2])))


def test_context_budget_exhausted_needs_the_engines_window():
    engine = {"max_model_len": 8}
    full = _call(0, [1, 2, 3, 4, 5], [6, 7, 8], finish_reason="length", claims={"engine": engine})
    capped = _call(1, [9], [6, 7], finish_reason="length", claims={"engine": engine})
    unknown = _call(2, [1, 2, 3, 4, 5, 11], [6, 7, 8], finish_reason="length")
    rollout = analyse(SessionInput("s", [full, capped, unknown]))
    flagged = [f.node_id for f in rollout.findings if f.code == "context_budget_exhausted"]
    assert flagged == ["n0"]


def test_raw_logprobs_are_fatal_only_where_the_distribution_was_shaped():
    raw = {"engine": {"logprobs_mode": "raw"}}
    calls = [
        _call(0, [1], [2], requested_params={"temperature": 0.7}, claims=raw),
        _call(1, [1, 2, 3], [4], requested_params={"temperature": 1.0}, claims=raw),
        _call(2, [1, 2, 3, 4, 5], [6], requested_params={"temperature": 1.0, "top_p": 0.9}, claims=raw),
        _call(3, [9], [8], requested_params={"temperature": 0.7}, claims={"engine": {"logprobs_mode": "processed"}}),
        _call(4, [10], [8], requested_params={"temperature": 1.0}, submitted_params={"temperature": 1.3}, claims=raw),
    ]
    rollout = analyse(SessionInput("s", calls))
    flagged = [(f.node_id, f.level) for f in rollout.findings if f.code == "raw_logprobs"]
    assert flagged == [("n0", "FATAL"), ("n2", "FATAL"), ("n4", "FATAL")]


def test_raw_logprobs_from_a_documents_metadata():
    turn = Turn("c0", [1, 2], [3], logprobs=[-0.2])
    record = vllm_chat(turn)
    record["request"]["temperature"] = 0.6
    assert "raw_logprobs" not in _codes(rollout_of([record]))
    from rollout_graph.core.engine import logprobs_mode

    call = rollout_of([record]).calls[0]
    assert logprobs_mode(call, {"metadata": {"llm": {"logprobs_mode": "raw"}}}) == "raw"
    assert logprobs_mode(call, {"logprobs_mode": "processed"}) == "processed"


def test_root_count_guards_the_forest():
    from rollout_graph.core.findings import rollout_validator_findings
    from rollout_graph.core.topology import Topology

    calls = [_call(0, [1], [2])]
    broken = Topology(parents=[0], children=[[0]], roots=[], leaves=[], forks=[], root_of=[0], depth=[0], discarded={})
    assert [f.code for f in rollout_validator_findings(calls, broken, [], None)] == ["root_count"]
    assert "root_count" not in _codes(analyse(SessionInput("s", calls)))


# --- against OpenEnv's own validators ----------------------------------------------------------


def _openenv_root() -> Path | None:
    """Where the installed ``openenv`` package is: this interpreter's, else the writers' venv
    (``ROLLOUT_GRAPH_WRITERS_PYTHON``, tests/conformance/writers.py)."""
    spec = importlib.util.find_spec("openenv")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    python = os.environ.get("ROLLOUT_GRAPH_WRITERS_PYTHON")
    if not python or not Path(python).exists():
        return None
    ask = "import importlib.util as u; s = u.find_spec('openenv'); print(next(iter(s.submodule_search_locations)) if s else '')"
    found = subprocess.run([python, "-c", ask], capture_output=True, text=True, timeout=60).stdout.strip()
    return Path(found) if found else None


def _openenv_validate():
    """OpenEnv 0.10's ``validate.py`` as shipped (it needs only the standard library), loaded by path
    so the rest of its package (fastapi, fastmcp, ...) is not imported."""
    root = _openenv_root()
    if root is None:
        message = "no openenv 0.10 here or at ROLLOUT_GRAPH_WRITERS_PYTHON (tests/conformance/writers.py)"
        if os.environ.get("ROLLOUT_GRAPH_REQUIRE_WRITERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    path = root / "core" / "harness" / "capture" / "validate.py"
    if not path.exists():
        pytest.fail(f"openenv has no {path}, where 0.10 ships it")
    module_spec = importlib.util.spec_from_file_location("openenv_capture_validate", path)
    assert module_spec is not None and module_spec.loader is not None
    module = sys.modules.get(module_spec.name)
    if module is None:
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module  # its dataclasses look their module up
        module_spec.loader.exec_module(module)
    return module


ROLLOUTS = {
    "chain": lambda: [_call(0, [1], [2, 3]), _call(1, [1, 2, 3, 4], [5])],
    "fork with a retry": lambda: [
        _call(0, [1], [2]),
        _call(1, [1, 2, 3], [4]),
        _call(2, [1, 2, 3], [5]),
        _call(3, [1, 2, 3, 5, 6], [7, 8]),
    ],
    "certain tokens": lambda: [_call(0, [1, 2], [3, 4], [0.0, -1.0]), _call(1, [1, 2, 3, 4, 9], [10], [0.0])],
    "empty reply": lambda: [_call(0, [1, 2], [])],
    "two roots": lambda: [_call(0, [1], [2]), _call(1, [40, 41], [42]), _call(2, [40, 41, 42, 43], [44])],
}
# OpenEnv's name for a finding ours names differently (the same condition).
THEIRS_TO_OURS = {"per_turn_capture_only": "per_turn_roots"}


@pytest.mark.parametrize("name", sorted(ROLLOUTS))
def test_our_findings_agree_with_openenvs_validators_on_the_same_turns(name):
    validate = _openenv_validate()
    rollout = analyse(SessionInput("s", ROLLOUTS[name]()))
    compared_rows = 0
    for seq in rollout.sequences:
        # ours names a row with nothing to train only when it is the agent's (an auxiliary call's
        # row is not trained anyway); OpenEnv checks every row it exports
        codes = SEQUENCE_CODES if seq.role == "agent" else SEQUENCE_CODES - {"nothing_trainable"}
        tokens = rollout.tokens(seq)
        row = SimpleNamespace(
            input_ids=tokens.input_ids.tolist(),
            loss_mask=tokens.loss_mask.tolist(),
            logprobs=tokens.logprobs.tolist(),
            prompt_len=seq.prompt_len,
        )
        theirs = {f.code for f in validate.check_sequence(row).findings} & codes
        leaf = rollout.calls[seq.leaf].node_id
        ours = {f.code for f in rollout.findings if f.leaf_id == leaf} & codes
        assert ours == theirs, (name, leaf)
        compared_rows += 1
    assert compared_rows == len(rollout.sequences) > 0
    stats = {k: rollout.stats[k] for k in ("n_roots", "n_forks", "n_discarded")}
    graph = SimpleNamespace(stats=lambda: {**stats, "n_turns": len(rollout.calls)})
    theirs = {THEIRS_TO_OURS.get(f.code, f.code) for f in validate.check_rollout(graph).findings}
    compared = {"forks", "discarded_turns", "multiple_roots", "per_turn_roots", "root_count"}
    assert _codes(rollout) & compared == theirs & compared, name


@pytest.mark.parametrize(
    "mask",
    [[0, 0, 0, 1, 1], [1, 1], [0, 0, 0, 1, 2], [0, 1, 0, 1, 1], [0, 0, 0, 1.0, 1], [0, 0, 0, 0, 0]],
)
def test_our_row_checks_agree_with_openenvs_validate_training_turn(mask):
    validate = _openenv_validate()
    prompt, sampled, logprobs = [1, 2, 3], [4, 5], [-0.5, -0.25]
    try:
        validate.validate_training_turn(prompt, sampled, logprobs, mask)
        theirs: set[str] = set()
    except ValueError as exc:
        theirs = {code for code in ROW_CODES if f"] {code}:" in str(exc)}
    turn = Turn("c0", prompt, sampled, logprobs=logprobs)
    ours = _codes(rollout_of([{**trace_entry(turn), "loss_mask": mask}]), "c0") & ROW_CODES
    assert ours == theirs


@pytest.mark.parametrize("reply", ["", "  ", "done"])
def test_empty_completion_agrees_with_openenvs_check_turn_eval(reply):
    validate = _openenv_validate()
    theirs = {f.code for f in validate.check_turn_eval({"role": "assistant", "content": reply}).findings}
    ours = _codes(rollout_of([message_only(Turn("c0", None, [], reply=reply))]), "c0")
    assert ("empty_completion" in ours) == ("empty_completion" in theirs)
