/* A plain digit array's body as ids (id_arrays._parse_plain), in one pass.
 *
 * The text is accepted exactly when it is one JSON array's body of plain non-negative
 * integers: JSON whitespace (space, tab, CR, LF) anywhere between tokens, elements of digits
 * with no leading zero ("0" alone is one), separated by single commas, no empty element nor a
 * trailing comma, each below 2**62. Everything else (a sign, a decimal point, an exponent, a
 * string, "01", "1 2", "1,,2", "1,", a number of 2**62 or more) is None, as the Python path
 * says; tests/test_speedups_ids.py holds the two to the same answer on odd and random bytes.
 *
 * Every read is bounded by the text's length. The ids buffer is sized by the commas the text
 * holds (an element per comma and one more, at most half the text's bytes plus one): a size
 * the text has, never one it states. */
#include "speedups.h"

#include <stdint.h>
#include <string.h>

const char rg_plain_ids_doc[] =
    "plain_ids(text: bytes) -> tuple | None\n\n"
    "The ids of a plain digit array's body (a bytearray of native int64, numpy wraps it\n"
    "without a copy) and the largest (0 when none), or None when the text is not exactly one\n"
    "JSON array's body of plain digits below 2**62 (id_arrays._parse_plain's answer).";

#define RG_LIMIT ((uint64_t)1 << 62)          /* ids this large are None (numpy would clamp) */
#define RG_BEFORE_DIGIT (RG_LIMIT / 10)       /* a value above this, times 10, would reach it */

static inline int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The commas of text[0:size] (the compiler vectorises the loop). */
static Py_ssize_t count_commas(const unsigned char *text, Py_ssize_t size) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        n += text[i] == ',';
    }
    return n;
}

/* Reads text[0:size] into out (room for every element), the element count into *count and
 * the largest id into *top; 0 when the text is not a plain body. */
static int parse(const unsigned char *p, Py_ssize_t size, int64_t *out, Py_ssize_t room,
                 Py_ssize_t *count, uint64_t *top) {
    const unsigned char *end = p + size;
    Py_ssize_t n = 0;
    uint64_t largest = 0;
    while (p < end && is_space(*p)) {
        p++;
    }
    if (p == end) {
        *count = 0;
        *top = 0;
        return 1; /* nothing, or only whitespace: the empty array */
    }
    for (;;) {
        /* an element: a run of digits, "0" or one not opening with a zero */
        if (p == end || (unsigned)(*p - '0') > 9) {
            return 0; /* an empty element, a trailing comma, or a byte no element opens with */
        }
        uint64_t v = (uint64_t)(*p - '0');
        p++;
        if (v == 0) {
            if (p < end && (unsigned)(*p - '0') <= 9) {
                return 0; /* a leading zero */
            }
        } else {
            while (p < end && (unsigned)(*p - '0') <= 9) {
                if (v > RG_BEFORE_DIGIT) {
                    return 0; /* 2**62 or more */
                }
                v = v * 10 + (uint64_t)(*p - '0');
                p++;
            }
            if (v >= RG_LIMIT) {
                return 0;
            }
        }
        if (n >= room) {
            return 0; /* cannot happen (one element per comma and one more): never written past */
        }
        out[n++] = (int64_t)v;
        if (v > largest) {
            largest = v;
        }
        if (p == end) {
            break;
        }
        if (*p != ',') {
            while (p < end && is_space(*p)) {
                p++;
            }
            if (p == end) {
                break;
            }
            if (*p != ',') {
                return 0; /* two numbers in one element ("1 2"), or a byte not in a plain body */
            }
        }
        p++; /* the comma: in the compact layout the next element starts here */
        while (p < end && is_space(*p)) {
            p++;
        }
    }
    *count = n;
    *top = largest;
    return 1;
}

PyObject *rg_plain_ids(PyObject *module, PyObject *text) {
    if (!PyBytes_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "plain_ids() takes bytes");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(text);
    Py_ssize_t size = PyBytes_GET_SIZE(text);
    /* at most one element per comma and one more; size / 2 + 1 bounds that whatever it holds */
    Py_ssize_t room = count_commas(p, size) + 1;
    if (room > size / 2 + 1) {
        room = size / 2 + 1;
    }
    PyObject *ids = PyByteArray_FromStringAndSize(NULL, room * (Py_ssize_t)sizeof(int64_t));
    if (ids == NULL) {
        return NULL;
    }
    Py_ssize_t count = 0;
    uint64_t top = 0;
    if (!parse(p, size, (int64_t *)PyByteArray_AS_STRING(ids), room, &count, &top)) {
        Py_DECREF(ids);
        Py_RETURN_NONE;
    }
    if (count != room && PyByteArray_Resize(ids, count * (Py_ssize_t)sizeof(int64_t)) < 0) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *largest = PyLong_FromUnsignedLongLong(top);
    if (largest == NULL) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, ids, largest);
    Py_DECREF(ids);
    Py_DECREF(largest);
    return result;
}
