"""Analyses of an analysed rollout: near misses, fork and retry diffs, prefix breaks, context
origin, token flow, retokenization, and decoding token ids to text."""
