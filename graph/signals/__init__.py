"""Training signals joined to the inference side of every token (docs/signals.md).

A signals file holds what the trainer computed for the training rows that ``export`` writes:
rows keyed by ``session_id`` and ``leaf_id``, with optional ``trainer_logprobs`` and
``advantages`` (one float per ``input_ids`` position of that row), a ``reward`` and any other
scalar columns. :mod:`rollout_graph.signals.reading` reads such a file (JSONL or Parquet) and
:mod:`rollout_graph.signals.join` joins it to analysed rollouts: per-rollout and per-call
trainer-vs-inference figures, a WARN ``logprob_mismatch`` per call over a threshold and a FATAL
``signals_misaligned`` per row that does not fit the row it names.
"""
