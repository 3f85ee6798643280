"""What a token of a framework's row is, relative to the calls (docs/reconcile.md, "Provenance"):
the codes ``model.row_tokens`` gives each position and ``origin.prompt_codes`` gives prompt
positions, and their names in the JSON and the app (:data:`PROVENANCE`). A leaf of the package:
the model and the prompt-origin reader both import it.
"""

from __future__ import annotations

CONTEXT = 0  # mask 0: prompt ids as the engine saw them (tool output, user text, template glue)
SAMPLED = 1  # mask 1: the model sampled this id here, after exactly this prefix, with its logprob
SAMPLED_AS_CONTEXT = 2  # mask 0: the model's own sampled id, in place, kept as context
RETOKENIZED = 3  # mask 0: prompt ids standing where an earlier reply was, the same text with other ids
OFF_POLICY = 4  # mask 1: trained, but the model never sampled this id after this prefix
NO_LOGPROB = 5  # mask 1: sampled here, but trained without its recorded logprob (0.0 stands in)
PROVENANCE = ("context", "sampled", "sampled_as_context", "retokenized", "off_policy", "no_logprob")
TRAINED_CODES = (SAMPLED, OFF_POLICY, NO_LOGPROB)
