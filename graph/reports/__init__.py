"""What the command line writes: the JSON contract, text summaries and explanations, transcripts,
exports (rows, trace entries, GraphML) and the corpus audit."""
