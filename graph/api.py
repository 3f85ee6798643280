"""The documented entry point for notebooks and scripts: :func:`load` (docs/python-api.md).

``rg.load(*paths)`` is :func:`rollout_graph.ingest.load.files.load_paths` (the one load path,
``load_files``, without the cache, in this process) and :func:`rollout_graph.pipeline.analyse` of
every session; :class:`Rollouts` holds the result and its load report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rollout_graph.core.records import LoadResult, short
from rollout_graph.core.rollout import Rollout
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse


class Rollouts(dict[str, Rollout]):
    """Rollouts by session id, in load order, with the load report of the files they came from.

    Attributes:
        report: the :class:`~rollout_graph.core.records.LoadResult`: files read, records, loaded and
            skipped (each skip names its file, line and reason); ``records == loaded + skipped``.
    """

    report: LoadResult

    def __init__(self, report: LoadResult, rollouts: dict[str, Rollout]) -> None:
        super().__init__(rollouts)
        self.report = report

    def __repr__(self) -> str:
        skipped = len(self.report.skipped)
        names = ", ".join(short(k, 30) for k in list(self)[:3]) + (", …" if len(self) > 3 else "")
        return (
            f"Rollouts({len(self)} rollouts [{names}] from {len(self.report.files)} files, {skipped} skipped records)"
        )


def load(
    *paths: str | Path, progress: Callable[[int, int, int], None] | None = None, limits: Limits | None = None
) -> Rollouts:
    """Load trace files or folders and analyse every rollout in them.

    Args:
        *paths: trace files (``.jsonl``, ``.json``, ``.ndjson``, optionally ``.gz`` / ``.zst``)
            or folders, read recursively.
        progress: called as ``progress(files_done, files_total, records_so_far)`` while loading.
        limits: the resource limits of the read (:class:`rollout_graph.Limits`; the defaults without,
            docs/limits.md): a record over a limit is skipped and named in the report.

    Returns:
        A mapping from session id to :class:`~rollout_graph.core.rollout.Rollout`, in load order, with
        the load report on ``.report``. Bad records never stop a load: they are skipped and
        named in the report.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {', '.join(missing)}")
    loaded = load_paths(paths, progress, limits)  # load_files without the cache, in this process
    return Rollouts(loaded, {sid: analyse(session) for sid, session in loaded.sessions.items()})
