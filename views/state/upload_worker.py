"""The app's side of loading an upload in a capped child process (rollout_graph.worker).

Entry point: ``load_upload(named, ...)``: every upload is parsed, linked and analysed in a process of its
own with an address-space cap and a wall-clock budget (``ROLLOUT_GRAPH_MAX_LOAD_SECONDS``,
default 60 s), killed when its visitor's session ends; ``UploadRefused`` says why one was refused.

Where it sits: called by views/state/sources.py ``load_uploads`` (docs/limits.md, "One upload,
one capped process")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rollout_graph.core.records import LoadResult
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.worker import Budget, LoadCancelled, LoadRefused, load_in_child


class UploadRefused(ValueError):
    """An upload the app will not show: too large, too slow, too big in memory, or cancelled.
    The message is Markdown-safe (file names go through the escaper). ``final``: the same bytes
    would be refused again (over a budget, or failed), so the refusal can be remembered."""

    def __init__(self, message: str, final: bool = True) -> None:
        super().__init__(message)
        self.final = final


@dataclass(frozen=True)
class ChildProgress:
    """The child's progress, in the shape the sidebar's bar draws (bytes_done / bytes_total / describe)."""

    stage: str
    files_done: int
    files_total: int
    records: int
    sessions_done: int
    sessions_total: int
    lines_total: int | None = None  # None: a compressed upload (the reading half moves file by file)
    elapsed: float = 0.0
    budget: float = 0.0

    @property
    def bytes_done(self) -> int:
        # reading is the first half of the bar (records over the upload's lines), analysing the second
        if self.stage == "reading":
            if self.lines_total:
                return int(500 * min(self.records / self.lines_total, 1.0))
            return int(500 * self.files_done / max(self.files_total, 1))
        return 500 + int(500 * self.sessions_done / max(self.sessions_total, 1))

    @property
    def bytes_total(self) -> int:
        return 1000

    def describe(self) -> str:
        """``reading file 1 of 2 · 1,200 records · 3 s of at most 60 s``."""
        if self.stage == "reading":
            what = f"reading file {min(self.files_done + 1, self.files_total)} of {self.files_total} · {self.records:,} records"
        else:
            what = f"analysing rollout {self.sessions_done:,} of {self.sessions_total:,}"
        return what + (f" · {self.elapsed:.0f} s of at most {self.budget:.0f} s" if self.budget else "")


def _progress(raw: dict[str, Any]) -> ChildProgress:
    return ChildProgress(
        stage=str(raw.get("stage", "reading")),
        files_done=int(raw.get("files_done", 0)),
        files_total=int(raw.get("files_total", 1)),
        records=int(raw.get("records", 0)),
        sessions_done=int(raw.get("sessions_done", 0)),
        sessions_total=int(raw.get("sessions_total", 0)),
        lines_total=None if raw.get("lines_total") is None else int(raw["lines_total"]),
        elapsed=float(raw.get("elapsed", 0.0)),
        budget=float(raw.get("budget", 0.0)),
    )


def upload_label(names: list[str]) -> str:
    """``This upload (a.jsonl, b.jsonl)``, file names escaped for Markdown, at most three named."""
    shown = ", ".join(md(n, 80) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"This upload ({shown})"


def load_upload(
    named: list[tuple[str, bytes]],
    limits: Any,
    alive: Callable[[], bool] | None,
    report: Callable[[Any], None],
) -> tuple[LoadResult, dict[str, Rollout]] | None:
    """The upload's load and analysed rollouts from a capped child; None when its load cannot
    travel in the columnar form (the caller loads it in process: the child just showed it fits).

    Raises:
        UploadRefused: over the time or memory budget, cancelled, or failed in the child.
    """
    label = upload_label([name for name, _ in named])
    try:
        done = load_in_child(
            named, limits, Budget.from_env(), label=label, alive=alive, progress=lambda raw: report(_progress(raw))
        )
    except LoadCancelled as exc:
        raise UploadRefused(str(exc), final=False) from None
    except LoadRefused as exc:
        if exc.detail is not None:  # the child's own words may quote the trace
            raise UploadRefused(f"{label} could not be analysed: {md(exc.detail, 300)}") from None
        raise UploadRefused(str(exc)) from None
    if done.loaded is None or done.rollouts is None:
        return None
    return done.loaded, done.rollouts
