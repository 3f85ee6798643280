/* A chat logprob content array's sampled side (typed._sampled_only): to be written. */
#include "speedups.h"

const char rg_sampled_entries_doc[] =
    "sampled_entries(span: bytes) -> tuple | None\n\n"
    "The sampled tokens and logprobs of a content array, or None (the Python path reads it).";

PyObject *rg_sampled_entries(PyObject *module, PyObject *span) {
    if (!PyBytes_Check(span)) {
        PyErr_SetString(PyExc_TypeError, "sampled_entries() takes bytes");
        return NULL;
    }
    Py_RETURN_NONE;
}
