"""A fragment run's end reaches the browser as it ended, even when another fragment's run starts
before it was sent.

Entry point: ``install()`` (once per page run, views/app.py). Streamlit 1.67 relabels every unsent
"fragment run finished" as "finished early for rerun" when a run starts, and the browser then
keeps elements the ended run did not draw again; on a followed trace the live tick starts a run
every second, so a search or a step could leave the previous call's elements on the page.
``install`` keeps the ends of other fragments' runs as they were (``ends_other_fragments_run``).

Where it sits: a patch of Streamlit's forward-message queue, tested by tests/ui/test_run_ends.py
(docs/performance.md "Limits: what is not met")."""

from __future__ import annotations

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

_streamlit_clear = ForwardMsgQueue.clear


def ends_other_fragments_run(msg: ForwardMsg, fragment_ids_this_run: list[str]) -> bool:
    """Whether ``msg`` is the unsent end of a fragment run none of whose fragments reruns now."""
    run = msg.metadata.run.fragment_ids
    return (
        msg.WhichOneof("type") == "script_finished"
        and msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
        and bool(run)
        and not set(run) & set(fragment_ids_this_run)
    )


def _clear(
    self: ForwardMsgQueue, retain_lifecycle_msgs: bool = False, fragment_ids_this_run: list[str] | None = None
) -> None:
    """Streamlit's clear, but the unsent ends of other fragments' runs keep their label."""
    ends = (
        [m for m in self._queue if ends_other_fragments_run(m, fragment_ids_this_run)]
        if retain_lifecycle_msgs and fragment_ids_this_run is not None
        else []
    )
    _streamlit_clear(self, retain_lifecycle_msgs, fragment_ids_this_run)
    for msg in ends:  # kept in the queue (a lifecycle message), relabelled in place: set back
        msg.script_finished = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


def _understood() -> bool:
    """Whether this Streamlit's queue is the one :func:`_clear` was written for: the relabelling
    function, the run tag on a message's metadata and ``clear``'s parameters."""
    import inspect

    from streamlit.runtime import forward_msg_queue

    try:
        parameters = list(inspect.signature(_streamlit_clear).parameters)
    except (TypeError, ValueError):
        return False
    return (
        hasattr(forward_msg_queue, "_update_script_finished_message")
        and "run" in ForwardMsg().metadata.DESCRIPTOR.fields_by_name
        and parameters == ["self", "retain_lifecycle_msgs", "fragment_ids_this_run"]
    )


def install() -> bool:
    """Make the server's session queues keep other fragments' run ends (once per process); a
    Streamlit whose queue is another (:func:`_understood`) is left as it is. True when installed."""
    if ForwardMsgQueue.clear is _clear:
        return True
    if not _understood():
        return False
    ForwardMsgQueue.clear = _clear  # type: ignore[method-assign]
    return True
