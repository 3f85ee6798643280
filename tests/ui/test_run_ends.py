"""views/state/run_ends.py against Streamlit's own queue clear: the same messages kept, in the same
order, the same labels, but an unsent fragment run's end whose fragments do not rerun now."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

from rollout_graph.ui.state import run_ends

FRAGMENTS = ("a", "b", "c")
ENDS = (
    ForwardMsg.FINISHED_SUCCESSFULLY,
    ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
    ForwardMsg.FINISHED_EARLY_FOR_RERUN,
)


def _message(kind: str, fragments: list[str], end: int, index: int) -> ForwardMsg:
    msg = ForwardMsg()
    if kind == "delta":
        msg.metadata.delta_path.extend([0, index])
        msg.delta.fragment_id = fragments[0] if fragments else ""
        msg.delta.new_element.markdown.body = f"element {index}"
    elif kind == "end":
        msg.metadata.run.script_run_id = "run"
        msg.metadata.run.fragment_ids.extend(fragments)
        msg.script_finished = end  # type: ignore[assignment]
    else:
        msg.session_status_changed.script_is_running = False
    return msg


messages = st.lists(
    st.tuples(
        st.sampled_from(("delta", "end", "status")),
        st.lists(st.sampled_from(FRAGMENTS), max_size=2, unique=True),
        st.sampled_from(ENDS),
    ),
    max_size=8,
)


def _queue(spec) -> ForwardMsgQueue:
    queue = ForwardMsgQueue()
    for index, (kind, fragments, end) in enumerate(spec):
        queue.enqueue(_message(kind, fragments, end, index))
    return queue


@given(messages, st.none() | st.lists(st.sampled_from(FRAGMENTS), max_size=2, unique=True), st.booleans())
def test_clear_relabels_only_the_ends_it_must(spec, starting, retain):
    before = [m.SerializeToString() for m in _queue(spec)._queue]
    theirs = _queue(spec)
    run_ends._streamlit_clear(theirs, retain, starting)
    ours = _queue(spec)
    run_ends._clear(ours, retain, starting)
    assert len(ours._queue) == len(theirs._queue)
    for mine, streamlit in zip(ours._queue, theirs._queue, strict=True):
        sent = ForwardMsg()
        sent.CopyFrom(streamlit)
        if retain and starting is not None and run_ends.ends_other_fragments_run(mine, starting):
            sent.script_finished = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
        assert mine == sent
    if retain and starting is not None:  # an end kept as it ended: a fragment run none of whose fragments reruns
        for msg in ours._queue:
            if (
                msg.WhichOneof("type") == "script_finished"
                and msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
            ):
                assert msg.metadata.run.fragment_ids and not set(msg.metadata.run.fragment_ids) & set(starting)
                assert msg.SerializeToString() in before


def test_a_tick_starting_keeps_the_explorer_runs_end_and_its_elements():
    queue = _queue([("delta", ["explorer"], 0), ("end", ["explorer"], ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)])
    run_ends._clear(queue, True, ["tick"])
    assert [m.WhichOneof("type") for m in queue._queue] == ["delta", "script_finished"]
    assert queue._queue[1].script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    # the same fragment rerunning drops its deltas: its end stays cut short, as Streamlit sends it
    queue = _queue([("delta", ["explorer"], 0), ("end", ["explorer"], ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)])
    run_ends._clear(queue, True, ["explorer"])
    assert [m.script_finished for m in queue._queue] == [ForwardMsg.FINISHED_EARLY_FOR_RERUN]


def test_install_replaces_the_servers_queue_clear(monkeypatch):
    monkeypatch.setattr(ForwardMsgQueue, "clear", run_ends._streamlit_clear)  # as before any app ran here
    assert run_ends.install() and run_ends.install()  # once, and again harmlessly
    assert ForwardMsgQueue.clear is run_ends._clear


def test_a_streamlit_whose_queue_is_another_is_left_as_it_is(monkeypatch):
    from streamlit.runtime import forward_msg_queue

    monkeypatch.setattr(ForwardMsgQueue, "clear", run_ends._streamlit_clear)  # as before any app ran here
    monkeypatch.delattr(forward_msg_queue, "_update_script_finished_message")
    assert not run_ends.install()
    assert ForwardMsgQueue.clear is run_ends._streamlit_clear
