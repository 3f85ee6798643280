/* A plain digit array's body as ids (id_arrays._parse_plain): to be written. */
#include "speedups.h"

const char rg_plain_ids_doc[] =
    "plain_ids(text: bytes) -> tuple | None\n\n"
    "The ids of a plain digit array's body and the largest, or None (the Python path reads it).";

PyObject *rg_plain_ids(PyObject *module, PyObject *text) {
    if (!PyBytes_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "plain_ids() takes bytes");
        return NULL;
    }
    Py_RETURN_NONE;
}
