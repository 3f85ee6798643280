/* A plain digit array's body as ids (shortcuts/id_arrays._parse_plain), in one pass.
 *
 * The text is accepted exactly when it is one JSON array's body of plain non-negative
 * integers: JSON whitespace (space, tab, CR, LF) anywhere between tokens, elements of digits
 * with no leading zero ("0" alone is one), separated by single commas, no empty element nor a
 * trailing comma, each below 2**62. Everything else (a sign, a decimal point, an exponent, a
 * string, "01", "1 2", "1,,2", "1,", a number of 2**62 or more) is None, as the Python path
 * says; tests/ingest/test_speedups_ids.py holds the two to the same answer on odd and random bytes.
 *
 * Every read is bounded by the text's length. The ids buffer is sized by the commas the text
 * holds (an element per comma and one more, at most half the text's bytes plus one): a size
 * the text has, never one it states. */
#include "speedups.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

const char rg_plain_ids_doc[] =
    "plain_ids(text: bytes) -> tuple | None\n\n"
    "The ids of a plain digit array's body (a bytearray of native int64, numpy wraps it\n"
    "without a copy) and the largest (0 when none), or None when the text is not exactly one\n"
    "JSON array's body of plain digits below 2**62 (id_arrays._parse_plain's answer).";

#define RG_LIMIT ((uint64_t)1 << 62) /* ids this large are None (numpy would clamp) */

/* RG_SWAR (eight digits at once) and RG_SSE2 (sixteen bytes compared at once) are on where the
 * compiler can; -DRG_SWAR=0 -DRG_SSE2=0 builds the portable byte loops (tested that way too). */
#ifndef RG_SWAR
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RG_SWAR 1
#else
#define RG_SWAR 0
#endif
#endif

#if RG_SWAR
/* The value of eight digit values, one a byte, the first in the lowest (memory order). */
static inline uint64_t eight_digits(uint64_t v) {
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
        32;
    return v;
}
#endif

static inline int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

#ifndef RG_SSE2
#if defined(__SSE2__) && defined(__x86_64__)
#define RG_SSE2 1
#else
#define RG_SSE2 0
#endif
#endif

/* The commas of text[0:size], and whether every byte is a digit or a comma (the compact
 * layout json.dumps and the engines write): sixteen bytes compared at once (SSE2, every x86-64
 * has it), the bytes after the last sixteen one by one. */
static Py_ssize_t count_commas(const unsigned char *text, Py_ssize_t size, int *compact) {
    Py_ssize_t n = 0, i = 0;
    int others = 0;
#if RG_SSE2
    const __m128i comma = _mm_set1_epi8(',');
    const __m128i zero_digit = _mm_set1_epi8('0');
    const __m128i nine = _mm_set1_epi8(9);
    const __m128i zero = _mm_setzero_si128();
    __m128i plain = _mm_set1_epi8(-1); /* a lane stays all ones while its bytes are plain */
    while (size - i >= 16) {
        /* a lane counts at most 255 before it is added up */
        Py_ssize_t blocks = (size - i) / 16;
        if (blocks > 255) {
            blocks = 255;
        }
        __m128i lanes = _mm_setzero_si128();
        for (Py_ssize_t b = 0; b < blocks; b++, i += 16) {
            __m128i chunk = _mm_loadu_si128((const __m128i *)(text + i));
            __m128i commas = _mm_cmpeq_epi8(chunk, comma);
            __m128i value = _mm_sub_epi8(chunk, zero_digit); /* a digit's value, else above 9 unsigned */
            __m128i digits = _mm_cmpeq_epi8(_mm_min_epu8(value, nine), value);
            plain = _mm_and_si128(plain, _mm_or_si128(commas, digits));
            lanes = _mm_sub_epi8(lanes, commas); /* a match is -1 */
        }
        __m128i sums = _mm_sad_epu8(lanes, zero); /* two 64-bit sums of eight lanes each */
        n += (Py_ssize_t)_mm_cvtsi128_si64(sums) + (Py_ssize_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
    }
    others = _mm_movemask_epi8(plain) != 0xFFFF;
#endif
    for (; i < size; i++) {
        n += text[i] == ',';
        others |= text[i] != ',' && (unsigned)text[i] - '0' > 9;
    }
    *compact = !others;
    return n;
}

/* The value of text[0:length], 1 <= length, every byte a digit; 0 when it is not one JSON
 * number below 2**62 (a leading zero, 2**62 or more). "more" is whether eight bytes can be
 * read from text (eight digits at once). */
static inline int element(const unsigned char *text, Py_ssize_t length, int more, uint64_t *value) {
    if (length > 1 && *text == '0') {
        return 0; /* a leading zero */
    }
#if RG_SWAR
    if (length <= 8 && more) {
        uint64_t x;
        memcpy(&x, text, 8);
        /* the digits' values moved up so that zeros stand before them */
        *value = eight_digits((x & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - length)));
        return 1;
    }
#endif
    if (length > 19) {
        return 0; /* 2**62 or more */
    }
    uint64_t v = 0; /* 19 digits fit uint64 (below 10**19 < 2**64) */
    for (Py_ssize_t i = 0; i < length; i++) {
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (v >= RG_LIMIT) {
        return 0;
    }
    *value = v;
    return 1;
}

/* Reads compact text[0:size] (size >= 1, every byte a digit or a comma, commas of them) into
 * out (room for commas + 1): the commas found sixteen bytes at once, so each element's place
 * does not wait on the one before it; 0 when an element is empty or not a JSON number below
 * 2**62. */
static int parse_compact(const unsigned char *text, Py_ssize_t size, int64_t *out, Py_ssize_t room,
                         Py_ssize_t *count, uint64_t *top) {
    Py_ssize_t n = 0, start = 0, i = 0;
    uint64_t largest = 0, v = 0;
#if RG_SSE2
    const __m128i comma = _mm_set1_epi8(',');
    for (; size - i >= 16; i += 16) {
        unsigned marks = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(text + i)), comma));
        while (marks != 0) {
            Py_ssize_t at = i + __builtin_ctz(marks);
            marks &= marks - 1;
            if (at == start || n >= room || !element(text + start, at - start, size - start >= 8, &v)) {
                return 0; /* an empty element (n >= room cannot happen: a comma per element) */
            }
            out[n++] = (int64_t)v;
            largest = v > largest ? v : largest;
            start = at + 1;
        }
    }
#endif
    for (; i <= size; i++) {
        if (i < size && text[i] != ',') {
            continue;
        }
        /* a comma, or the end: the element before it */
        if (i == start || n >= room || !element(text + start, i - start, size - start >= 8, &v)) {
            return 0;
        }
        out[n++] = (int64_t)v;
        largest = v > largest ? v : largest;
        start = i + 1;
    }
    *count = n;
    *top = largest;
    return 1;
}

/* Reads text[0:size] into out (room for every element), the element count into *count and
 * the largest id into *top; 0 when the text is not a plain body.
 *
 * text[size] is read as the end's sentinel: a bytes object's buffer always holds a NUL after
 * its last byte (CPython's guarantee), a byte that is no digit, comma or whitespace, so the
 * loops stop there without comparing the pointer with the end at every byte; a NUL that is
 * the end is told from one inside the text by its place. */
static int parse(const unsigned char *p, Py_ssize_t size, int64_t *out, Py_ssize_t room,
                 Py_ssize_t *count, uint64_t *top) {
    const unsigned char *end = p + size;
    Py_ssize_t n = 0;
    uint64_t largest = 0;
    while (is_space(*p)) {
        p++;
    }
    if (p == end) {
        *count = 0;
        *top = 0;
        return 1; /* nothing, or only whitespace: the empty array */
    }
    for (;;) {
        /* an element: a run of digits, "0" or one not opening with a zero */
        const unsigned char *first = p;
        uint64_t v = 0;
        unsigned d;
#if RG_SWAR
        if (end - p >= 8) {
            /* eight bytes at once: the run's length from the first byte that is no digit (no
             * branch per digit, so no misprediction where a run ends), its value by three
             * multiplies; a run of eight or more digits goes the byte loop below */
            uint64_t x;
            memcpy(&x, p, 8);
            uint64_t low = x & 0x0F0F0F0F0F0F0F0FULL;
            uint64_t other = ((x & 0xF0F0F0F0F0F0F0F0ULL) ^ 0x3030303030303030ULL) |
                             ((low + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL);
            uint64_t marks = (((other & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | other) &
                             0x8080808080808080ULL;
            if (marks != 0) {
                unsigned length = (unsigned)__builtin_ctzll(marks) >> 3;
                if (length == 0) {
                    return 0; /* an empty element, a trailing comma, or a byte no element opens with */
                }
                if (length > 1 && *p == '0') {
                    return 0; /* a leading zero */
                }
                v = eight_digits(low << (8 * (8 - length))); /* zeros before the digits */
                p += length;
                goto element;
            }
        }
#endif
        /* unsigned arithmetic: a run of more than 19 digits wraps, and is refused below */
        while ((d = (unsigned)*p - '0') <= 9) {
            v = v * 10 + d;
            p++;
        }
        Py_ssize_t digits = p - first;
        if (digits == 0) {
            return 0; /* an empty element, a trailing comma, or a byte no element opens with */
        }
        if (*first == '0' && digits > 1) {
            return 0; /* a leading zero */
        }
        /* 18 digits are below 10**18 < 2**62; 19 fit uint64 (below 10**19 < 2**64) */
        if (digits > 18 && (digits > 19 || v >= RG_LIMIT)) {
            return 0; /* 2**62 or more */
        }
#if RG_SWAR
    element:
#endif
        if (n >= room) {
            return 0; /* cannot happen (one element per comma and one more): never written past */
        }
        out[n++] = (int64_t)v;
        largest = v > largest ? v : largest;
        if (*p != ',') {
            if (p == end) {
                break;
            }
            while (is_space(*p)) {
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
        if (*p <= ' ') {
            while (is_space(*p)) {
                p++;
            }
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
    int compact = 0;
    Py_ssize_t room = count_commas(p, size, &compact) + 1;
    if (room > size / 2 + 1) {
        room = size / 2 + 1;
    }
    PyObject *ids = PyByteArray_FromStringAndSize(NULL, room * (Py_ssize_t)sizeof(int64_t));
    if (ids == NULL) {
        return NULL;
    }
    Py_ssize_t count = 0;
    uint64_t top = 0;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(ids);
    if (!(compact && size > 0 ? parse_compact(p, size, out, room, &count, &top)
                              : parse(p, size, out, room, &count, &top))) {
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
