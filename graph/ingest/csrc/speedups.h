/* The C speedups of rollout_graph's cold load (docs/performance.md, "Native speedups").
 *
 * Each function reads one thing exactly as the Python path reads it, or returns None and
 * leaves it to that path: None is always a correct answer. Input is untrusted: every read is
 * bounded by the buffer's length, nothing is allocated by a size the input states. */
#ifndef ROLLOUT_GRAPH_SPEEDUPS_H
#define ROLLOUT_GRAPH_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* content.c: a chat logprob content array's sampled tokens and logprobs (typed._sampled_only). */
PyObject *rg_sampled_entries(PyObject *module, PyObject *span);
extern const char rg_sampled_entries_doc[];

/* ids.c: a plain digit array's body as ids (id_arrays._parse_plain). */
PyObject *rg_plain_ids(PyObject *module, PyObject *text);
extern const char rg_plain_ids_doc[];

/* ids.c: a list of ints as int32 (tokens.token_ids). */
PyObject *rg_int32_ids(PyObject *module, PyObject *values);
extern const char rg_int32_ids_doc[];

#endif
