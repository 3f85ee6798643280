/* The token_id:N check of the record parse (ingest/tokens.py: token_id_list): whether a chat
 * choice's sampled tokens, joined by commas, are all "token_id:N" texts, exactly as the Python
 * path's regular expression (tokens._TOKEN_ID_LIST) fullmatches them. Bounded by the string's
 * length; no allocation. tests/ingest/test_speedups_tokens.py holds the two to one answer. */
#include "speedups.h"

#include <string.h>

const char rg_token_id_list_doc[] =
    "token_id_list(joined: str) -> bool\n\n"
    "Whether the text is 'token_id:N' pieces joined by commas, each N 0 or 1 to 18 ASCII digits\n"
    "without a leading zero (tokens._TOKEN_ID_LIST's fullmatch).";

PyObject *rg_token_id_list(PyObject *module, PyObject *joined) {
    if (!PyUnicode_Check(joined)) {
        PyErr_SetString(PyExc_TypeError, "token_id_list() takes a str");
        return NULL;
    }
    if (PyUnicode_READY(joined) < 0) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(joined)) { /* every character the pattern matches is ASCII */
        Py_RETURN_FALSE;
    }
    const char *text = (const char *)PyUnicode_1BYTE_DATA(joined);
    Py_ssize_t n = PyUnicode_GET_LENGTH(joined);
    static const char prefix[] = "token_id:";
    const Py_ssize_t prefix_length = (Py_ssize_t)sizeof(prefix) - 1;
    Py_ssize_t i = 0;
    for (;;) {
        if (n - i < prefix_length || memcmp(text + i, prefix, (size_t)prefix_length) != 0) {
            Py_RETURN_FALSE;
        }
        i += prefix_length;
        if (i >= n || text[i] < '0' || text[i] > '9') {
            Py_RETURN_FALSE;
        }
        if (text[i] == '0') {
            i++;
        } else {
            Py_ssize_t digits = 0;
            while (i < n && text[i] >= '0' && text[i] <= '9' && digits < 18) {
                i++;
                digits++;
            }
        }
        if (i == n) {
            Py_RETURN_TRUE;
        }
        if (text[i] != ',') {
            Py_RETURN_FALSE;
        }
        i++;
    }
}

