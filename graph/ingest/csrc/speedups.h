/* The C speedups of rollout_graph's cold load (docs/performance.md, "Native speedups";
 * docs/architecture.md, "The C speedups (optional)").
 *
 * Seven functions, one job per file, registered by module.c. Each reads one thing exactly as the
 * Python path reads it, or returns None and leaves it to that path: None is always a correct
 * answer. Input is untrusted: every read is bounded by the buffer's length, nothing is allocated
 * by a size the input states. */
#ifndef ROLLOUT_GRAPH_SPEEDUPS_H
#define ROLLOUT_GRAPH_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* logprob_entries.c: a chat logprob content array's sampled tokens and logprobs
 * (ingest/shortcuts/logprob_entries._sampled_only). */
PyObject *rg_sampled_entries(PyObject *module, PyObject *span);
extern const char rg_sampled_entries_doc[];

/* id_text.c: a plain digit array's body as ids (ingest/shortcuts/id_arrays._parse_plain). */
PyObject *rg_plain_ids(PyObject *module, PyObject *text);
extern const char rg_plain_ids_doc[];

/* id_lists.c: a list of ints as int32 (ingest/tokens.token_ids). */
PyObject *rg_int32_ids(PyObject *module, PyObject *values);
extern const char rg_int32_ids_doc[];

/* token_texts.c: the token_id:N texts check (ingest/tokens.token_id_list). */
PyObject *rg_token_id_list(PyObject *module, PyObject *joined);
extern const char rg_token_id_list_doc[];

/* identity_keys.c: whether a line lists one identity key twice (ingest/values/line._duplicate_identity_key). */
PyObject *rg_identity_repeats(PyObject *module, PyObject *raw);
extern const char rg_identity_repeats_doc[];

/* word_grams.c: two ASCII texts' word 3-gram counts (analysis/near_miss._SystemGrams.similar). */
PyObject *rg_gram_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
extern const char rg_gram_counts_doc[];

/* id_compare.c: where two id arrays first differ (analysis/near_miss._first_difference). */
PyObject *rg_first_difference(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
extern const char rg_first_difference_doc[];

#endif
