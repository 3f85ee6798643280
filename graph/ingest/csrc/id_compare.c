/* Where two id arrays first differ, for the near-miss pass (analysis/near_miss._first_difference
 * and the whole-span checks of _breaks_inside_reply): two C-contiguous 1-d buffers of one integer
 * width (int32 or int64) and one length, compared element by element; anything else is None and
 * numpy compares them. Reads only within the buffers' lengths.
 * tests/ingest/test_speedups_first_difference.py holds it to numpy. */
#include "speedups.h"

#include <stdint.h>

const char rg_first_difference_doc[] =
    "first_difference(a, b) -> int | None\n\n"
    "The first index where two C-contiguous 1-d buffers of one integer format (int32 or int64) and\n"
    "one length differ, their length when none does; None for anything else (numpy compares them).";

static int rg_id_format(const Py_buffer *view) {
    /* 4 or 8 (the item size) for a 1-d buffer of native int32 / int64, else 0 */
    if (view->ndim != 1 || view->format == NULL || view->format[0] == '\0' || view->format[1] != '\0') {
        return 0;
    }
    char f = view->format[0];
    if ((f == 'i' && view->itemsize == 4) || ((f == 'l' || f == 'q') && view->itemsize == 8)) {
        return (int)view->itemsize;
    }
    return 0;
}

PyObject *rg_first_difference(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "first_difference() takes two arrays");
        return NULL;
    }
    Py_buffer a, b;
    if (PyObject_GetBuffer(args[0], &a, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (PyObject_GetBuffer(args[1], &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&a);
        Py_RETURN_NONE;
    }
    PyObject *result;
    int size = rg_id_format(&a);
    if (size == 0 || rg_id_format(&b) != size || a.format[0] != b.format[0] || a.shape[0] != b.shape[0]) {
        result = Py_NewRef(Py_None);
    } else {
        Py_ssize_t n = a.shape[0], at = 0;
        if (size == 4) {
            const int32_t *x = (const int32_t *)a.buf, *y = (const int32_t *)b.buf;
            while (at < n && x[at] == y[at]) {
                at++;
            }
        } else {
            const int64_t *x = (const int64_t *)a.buf, *y = (const int64_t *)b.buf;
            while (at < n && x[at] == y[at]) {
                at++;
            }
        }
        result = PyLong_FromSsize_t(at);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return result;
}

