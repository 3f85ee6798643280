"""Load: trace files -> a load report of calls in sessions, from the persistent cache or parsed.

The top of ingest (docs/architecture.md, "Ingest: one way"): ``files`` (the one load path,
:func:`~rollout_graph.ingest.load.files.load_files`, that ``rg.load``, the command line and the
app call), ``calls`` (values -> calls in sessions: the one-process loader), ``pool`` and
``two_parts`` (the same result on more cores, with ``transfer``, ``file_probes``, ``children``,
``cpu_window``), ``cache`` (with ``cache_format``, ``cache_write``, ``cache_read``),
``trace_files`` (which files are traces), ``progress`` and ``calls_at_line`` (one record's calls
read from its place, for deep links).
"""
