"""The build's one addition to pyproject.toml: the optional C speedups of the cold path.

``rollout_graph.ingest._speedups`` (graph/ingest/csrc/: seven functions, one job per file) reads
what a cold load spends most of its time on, exactly as the Python path does, or declines and
leaves it to that path (docs/performance.md, "Native speedups"). It is optional: without a C compiler the build goes on
without it and every line takes the Python path, with the same results.
"""

from setuptools import Extension, setup

SOURCES = [
    "module.c",
    "logprob_entries.c",
    "id_text.c",
    "id_lists.c",
    "token_texts.c",
    "identity_keys.c",
    "word_grams.c",
    "id_compare.c",
]

setup(
    ext_modules=[
        Extension(
            "rollout_graph.ingest._speedups",
            sources=[f"graph/ingest/csrc/{name}" for name in SOURCES],
            depends=["graph/ingest/csrc/speedups.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
