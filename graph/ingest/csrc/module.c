/* rollout_graph.ingest._speedups: the module and its method table, one function per job (speedups.h
 * names the file of each; rollout_graph.ingest.speedups.FUNCTIONS is the list the Python side needs). */
#include "speedups.h"

static PyMethodDef methods[] = {
    {"sampled_entries", rg_sampled_entries, METH_O, rg_sampled_entries_doc},
    {"plain_ids", rg_plain_ids, METH_O, rg_plain_ids_doc},
    {"int32_ids", rg_int32_ids, METH_O, rg_int32_ids_doc},
    {"gram_counts", (PyCFunction)(void (*)(void))rg_gram_counts, METH_FASTCALL, rg_gram_counts_doc},
    {"token_id_list", rg_token_id_list, METH_O, rg_token_id_list_doc},
    {"first_difference", (PyCFunction)(void (*)(void))rg_first_difference, METH_FASTCALL, rg_first_difference_doc},
    {"identity_repeats", rg_identity_repeats, METH_O, rg_identity_repeats_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "rollout_graph.ingest._speedups",
    "C speedups of the cold load: each function reads exactly as the Python path does, or returns None.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    /* Raised when the Python side expects functions this build does not have. */
    if (PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
