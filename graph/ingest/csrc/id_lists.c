/* A list of Python ints as int32 ids, for the record parse (ingest/tokens.py: token_ids): every
 * element an exact int (not a bool nor a subclass) from 0 to 2**31 - 1, else None and the Python
 * path (a type scan and np.array) reads the list. The buffer is sized by the list's own length;
 * no call runs Python code while it is read. tests/ingest/test_speedups_ids.py holds it to the
 * Python path. */
#include "speedups.h"

#include <stdint.h>

const char rg_int32_ids_doc[] =
    "int32_ids(values: list) -> bytearray | None\n\n"
    "A list of ints as native int32 (numpy wraps it without a copy) when every element is an\n"
    "int (not a bool nor a subclass) from 0 to 2**31 - 1, else None (tokens.token_ids reads it).";

PyObject *rg_int32_ids(PyObject *module, PyObject *values) {
    if (!PyList_CheckExact(values)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (n == 0) {
        Py_RETURN_NONE; /* the caller's own empty array */
    }
    PyObject *ids = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (ids == NULL) {
        return NULL;
    }
    int32_t *out = (int32_t *)PyByteArray_AS_STRING(ids);
    /* no call below runs Python code (exact ints only), so the list keeps its length */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(values, i);
        if (!PyLong_CheckExact(item)) {
            Py_DECREF(ids);
            Py_RETURN_NONE; /* a bool, a float, None, a string, a list...: the Python path */
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow != 0 || v < 0 || v > INT32_MAX) {
            Py_DECREF(ids);
            Py_RETURN_NONE; /* negative, or beyond int32: the Python path */
        }
        out[i] = (int32_t)v;
    }
    return ids;
}
