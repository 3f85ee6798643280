/* The duplicate identity-key scan of a line (values/line._duplicate_identity_key): whether one of
 * "session_id", "call_id", "node_id" (quotes included) occurs twice in the bytes, the answer the
 * regular expression's findall (values/line._IDENTITY_KEY_AT) gives: a memchr for each '_', then
 * "_id\"" and the key's head before it. Bounded by the buffer's length; no allocation.
 * tests/ingest/test_speedups_identity.py holds the two to one answer. */
#include "speedups.h"

#include <string.h>

const char rg_identity_repeats_doc[] =
    "identity_repeats(raw: bytes) -> bool\n\n"
    "Whether one of \"session_id\", \"call_id\", \"node_id\" (quotes included) occurs twice in the\n"
    "bytes: values/line._IDENTITY_KEY_AT's findall listing one key twice.";

/* The next "_id\"" at or after from, or -1 (a memchr for '_' then a compare: bounded by n). */
static Py_ssize_t rg_next_id_quote(const unsigned char *raw, Py_ssize_t n, Py_ssize_t from) {
    while (from + 4 <= n) {
        const unsigned char *hit = memchr(raw + from, '_', (size_t)(n - 3 - from));
        if (hit == NULL) {
            return -1;
        }
        Py_ssize_t at = hit - raw;
        if (hit[1] == 'i' && hit[2] == 'd' && hit[3] == '"') {
            return at;
        }
        from = at + 1;
    }
    return -1;
}

PyObject *rg_identity_repeats(PyObject *module, PyObject *raw_object) {
    if (!PyBytes_Check(raw_object)) {
        PyErr_SetString(PyExc_TypeError, "identity_repeats() takes bytes");
        return NULL;
    }
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(raw_object);
    Py_ssize_t n = PyBytes_GET_SIZE(raw_object);
    int seen[3] = {0, 0, 0}; /* session, call, node */
    Py_ssize_t at = rg_next_id_quote(raw, n, 0);
    while (at >= 0) {
        /* a quote, then the key's head, ends right before "_id\"" */
        int which = -1;
        if (at >= 8 && memcmp(raw + at - 8, "\"session", 8) == 0) {
            which = 0;
        } else if (at >= 5 && memcmp(raw + at - 5, "\"call", 5) == 0) {
            which = 1;
        } else if (at >= 5 && memcmp(raw + at - 5, "\"node", 5) == 0) {
            which = 2;
        }
        if (which >= 0 && ++seen[which] > 1) {
            Py_RETURN_TRUE;
        }
        at = rg_next_id_quote(raw, n, at + 1);
    }
    Py_RETURN_FALSE;
}
