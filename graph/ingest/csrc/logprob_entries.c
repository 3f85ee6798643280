/* A chat logprob content array's sampled side (shortcuts/logprob_entries._sampled_only), in one pass.
 *
 * The span is validated as JSON exactly (RFC 8259: syntax, number grammar, string escapes,
 * strict UTF-8, no control characters in strings, the skipped ``top_logprobs`` included) and
 * the sampled side is read: each entry's ``token`` (a string) and ``logprob`` (a JSON number
 * with a fraction or an exponent: what msgspec decodes as a float). Anything else returns None
 * and the Python path (msgspec) reads the span: ints, None, other types as token or logprob, a
 * missing or repeated key, a key written with escapes, an empty array, a lone surrogate escape,
 * a logprob whose text is long or whose size is near the float limits (beyond 1e300, below
 * 1e-300, 2**53 or more), nesting deeper than MAX_DEPTH, any malformed byte. None is always a
 * correct answer: every accepted span is one msgspec decodes, to these values (tests/ingest/test_speedups_content.py).
 *
 * Every read is bounded by the span's end: a bytes object's buffer holds one NUL byte after its
 * length (CPython's guarantee, PyBytes_AsString), and the byte loops stop at a byte NUL is not
 * (a plain string byte, a digit, whitespace), so they read at most that NUL; every other read
 * checks the end. The buffers grow by doubling, their sizes bounded by the span's length (the
 * joined tokens are never longer than their escaped text).
 */
#include "speedups.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define CTZ(x) __builtin_ctz(x)
#else
#define ALWAYS_INLINE inline
#undef __SSE2__ /* the SSE2 loops use CTZ: the portable loops instead */
#endif

const char rg_sampled_entries_doc[] =
    "sampled_entries(span: bytes) -> tuple | None\n\n"
    "The sampled side of a chat logprob content array, or None (the Python path reads it):\n"
    "(rows, joined, tokens, floats, nonpositive, id_texts). ``joined``: the tokens joined with\n"
    "commas when none holds a comma (``tokens`` is then None), else None and ``tokens`` their\n"
    "list; ``floats``: the logprobs' float64 bytes; ``nonpositive``: none is positive;\n"
    "``id_texts``: every token is ``token_id:N`` as tokens.token_id_list reads it.";

#define MAX_DEPTH 8         /* the span's array is depth 1; deeper nesting returns None */
#define MAX_NUMBER_TEXT 40  /* a parsed logprob's text; longer returns None */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    /* the tokens' text, joined by commas */
    char *jb;
    Py_ssize_t jlen, jcap;
    /* where each token starts in jb (read when one holds a comma) */
    Py_ssize_t *starts;
    /* the logprobs */
    double *fv;
    Py_ssize_t rows, cap;
    int comma;   /* a token holds a comma */
    int ascii;   /* every token byte is ASCII */
    int ids;     /* every token is token_id:N so far */
    int nonpos;  /* no logprob is positive so far */
} Scan;

/* PLAIN[c]: c stands for itself inside a string (printable ASCII but '"' and '\\'). */
static unsigned char PLAIN[256];

static void init_tables(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = 1;
    PLAIN['"'] = PLAIN['\\'] = 0;
}

static inline void skip_ws(Scan *s) {
    /* compact JSON has none: one compare for the common case */
    while (*s->p <= ' ' && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
        s->p++;
    }
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p (bounded by the caller), or -1. */
static inline long hex4(const unsigned char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = (v << 4) | h;
    }
    return v;
}

/* The length of one strict UTF-8 sequence opening at p (as Python's "utf-8" decoder accepts:
 * no overlong forms, no surrogates, nothing beyond U+10FFFF), or 0. */
static inline int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    Py_ssize_t left = end - p;
    if (c >= 0xC2 && c <= 0xDF) {
        return (left >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) ? 4 : 0;
    }
    return 0;
}

/* A \u escape at s->p (just past the backslash, at 'u'): its code point (a surrogate pair
 * combined), s->p moved past it; -1 when malformed or a lone surrogate. */
static long read_u_escape(Scan *s) {
    if (s->end - s->p < 5) return -1;
    long cp = hex4(s->p + 1);
    if (cp < 0) return -1;
    s->p += 5;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return -1;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u') return -1;
        long lo = hex4(s->p + 2);
        if (lo < 0xDC00 || lo > 0xDFFF) return -1;
        s->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return cp;
}

/* p moved past a run of plain string bytes (PLAIN); 16 at a time with SSE2 while 16 bytes
 * remain before end, then one at a time up to the NUL after the span at most. */
static inline const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed: bytes of 0x80 and more are negative, below 0x20 too */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                    _mm_cmplt_epi8(v, space));
        int mask = _mm_movemask_epi8(stop);
        if (mask != 0) return p + CTZ((unsigned)mask);
        p += 16;
    }
#else
    (void)end;
#endif
    while (PLAIN[*p]) p++; /* stops at the NUL after the span */
    return p;
}

/* A string at s->p (its opening quote), validated and skipped. 0, or -1 when malformed. */
static ALWAYS_INLINE int skip_string(Scan *s) {
    s->p++;
    for (;;) {
        const unsigned char *p = s->p, *end = s->end;
        p = skip_plain(p, end);
        s->p = p;
        if (p >= end) return -1;
        unsigned char c = *p;
        if (c == '"') {
            s->p++;
            return 0;
        }
        if (c == '\\') {
            s->p++;
            if (s->p >= s->end) return -1;
            switch (*s->p) {
                case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                    s->p++;
                    break;
                case 'u':
                    if (read_u_escape(s) < 0) return -1;
                    break;
                default:
                    return -1;
            }
        } else if (c < 0x20) {
            return -1;
        } else if (c < 0x80) {
            s->p++;
        } else {
            int n = utf8_len(s->p, s->end);
            if (n == 0) return -1;
            s->p += n;
        }
    }
}

/* p moved past a run of ASCII digits (16 at a time with SSE2, else 8, while as many bytes
 * remain before end). */
static inline const unsigned char *skip_digits(const unsigned char *p, const unsigned char *end) {
#ifdef __SSE2__
    const __m128i below = _mm_set1_epi8('0'), above = _mm_set1_epi8('9');
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i other = _mm_or_si128(_mm_cmplt_epi8(v, below), _mm_cmpgt_epi8(v, above));
        int mask = _mm_movemask_epi8(other);
        if (mask != 0) return p + CTZ((unsigned)mask);
        p += 16;
    }
#endif
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        /* every byte 0x30..0x39: high nibble 3, and adding 6 leaves it 3 */
        if ((x & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL ||
            ((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL) {
            break;
        }
        p += 8;
    }
    while (*p >= '0' && *p <= '9') p++; /* stops at the NUL after the span */
    return p;
}

/* A number at s->p, its grammar checked and skipped; *fraction set when it has a fraction or an
 * exponent. 0, or -1 when malformed or when its size may be beyond the floats (more than 300
 * integer digits with the exponent: orjson refuses a number that is infinite as a double, so
 * such a span is left to the Python path, whatever it makes of it). */
static ALWAYS_INLINE const unsigned char *number_end(const unsigned char *p,
                                                                           const unsigned char *end,
                                                                           int *fraction) {
    *fraction = 0;
    if (*p == '-') p++;
    if (p >= end) return NULL;
    const unsigned char *digits = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = skip_digits(p, end);
    } else {
        return NULL;
    }
    Py_ssize_t size = p - digits;
    if (*p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return NULL;
        p = skip_digits(p, end);
        *fraction = 1;
    }
    if ((*p == 'e' || *p == 'E')) {
        p++;
        int neg = 0;
        if ((*p == '+' || *p == '-')) neg = *p++ == '-';
        if (p >= end || *p < '0' || *p > '9') return NULL;
        const unsigned char *e = p;
        long exp = 0;
        while (*p >= '0' && *p <= '9') {
            if (p - e < 6) exp = exp * 10 + (*p - '0');
            p++;
        }
        if (p - e >= 6) return NULL; /* an exponent of six digits or more */
        if (neg) exp = -exp;
        if (exp < -300) return NULL;
        size += exp;
        *fraction = 1;
    }
    if (size > 300) return NULL;
    return p;
}

static ALWAYS_INLINE int skip_number(Scan *s, int *fraction) {
    const unsigned char *p = number_end(s->p, s->end, fraction);
    if (p == NULL) return -1;
    s->p = p;
    return 0;
}

#define OTHER 0
#define TOKEN 1
#define LOGPROB 2
#define TOPS 4
#define ESCAPED 8

/* An object's key at s->p (its opening quote) and the colon after it, s->p moved past the
 * colon: TOKEN, LOGPROB, TOPS, ESCAPED (a key written with a backslash) or OTHER; -1 when
 * malformed. The keys engines write compact are matched as they stand (the same bytes the
 * general path below accepts). */
static ALWAYS_INLINE int read_key(Scan *s) {
    const unsigned char *p = s->p;
    Py_ssize_t left = s->end - p;
    if (left >= 8 && memcmp(p, "\"token\":", 8) == 0) {
        s->p += 8;
        return TOKEN;
    }
    if (left >= 10 && memcmp(p, "\"logprob\":", 10) == 0) {
        s->p += 10;
        return LOGPROB;
    }
    if (left >= 15 && memcmp(p, "\"top_logprobs\":", 15) == 0) {
        s->p += 15;
        return TOPS;
    }
    if (left < 1 || *p != '"') return -1;
    const unsigned char *key = p + 1;
    if (skip_string(s) < 0) return -1;
    Py_ssize_t klen = s->p - 1 - key;
    int which = OTHER;
    if (memchr(key, '\\', (size_t)klen) != NULL) {
        which = ESCAPED;
    } else if (klen == 5 && memcmp(key, "token", 5) == 0) {
        which = TOKEN;
    } else if (klen == 7 && memcmp(key, "logprob", 7) == 0) {
        which = LOGPROB;
    } else if (klen == 12 && memcmp(key, "top_logprobs", 12) == 0) {
        which = TOPS;
    }
    skip_ws(s);
    if (s->p >= s->end || *s->p != ':') return -1;
    s->p++;
    return which;
}

static int skip_value(Scan *s, int depth);

/* Past a ``bytes`` list as vLLM writes it, ``[]`` or ``[n,n,...]`` with each n a JSON integer
 * of one to three digits (``0``, or no leading zero), at p (its ``[``); or NULL for anything else
 * (the general path then reads the value). Whatever the integers are, the bytes are valid JSON:
 * the list is only validated, never read. Stops at the NUL after the span at most. */
static inline const unsigned char *byte_list_bytewise(const unsigned char *p, const unsigned char *end) {
    if (p >= end || *p != '[') return NULL;
    p++;
    if (*p == ']') return p + 1;
    for (;;) {
        unsigned char c = *p;
        if (c == '0') {
            p++;
        } else if (c >= '1' && c <= '9') {
            p++;
            if (*p >= '0' && *p <= '9') {
                p++;
                if (*p >= '0' && *p <= '9') p++;
            }
        } else {
            return NULL;
        }
        if (p >= end) return NULL;
        if (*p == ',') {
            p++;
        } else if (*p == ']') {
            return p + 1;
        } else {
            return NULL; /* a fourth digit, a leading zero, a space, another value */
        }
    }
}

#ifdef __SSE2__
/* byte_list_bytewise's answer, 16 bytes at a time while 16 remain before end (else the bytewise
 * loop reads the list from its start). Per block: D, C, Z the masks of its digits, commas and
 * zeros; the list goes on while every byte is a digit or a comma, and the first other byte must
 * be its closing bracket. The grammar as masks, with what the block before left (its last three
 * digit bits, whether its last byte was a separator, a digit, or a zero opening a number):
 * no four digits in a row; no comma after a separator (``[`` or ``,``); no bracket after a comma;
 * no zero opening a number followed by a digit. */
static inline const unsigned char *byte_list(const unsigned char *p, const unsigned char *end) {
    const unsigned char *open = p;
    if (p >= end || *p != '[') return NULL;
    p++;
    if (*p == ']') return p + 1;
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8('9'), comma = _mm_set1_epi8(',');
    unsigned prev3 = 0, sep = 1, digit = 0, zero_open = 0;
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned D = (unsigned)_mm_movemask_epi8(
                         _mm_andnot_si128(_mm_or_si128(_mm_cmplt_epi8(v, zero), _mm_cmpgt_epi8(v, nine)),
                                          _mm_set1_epi8(-1)));
        unsigned C = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma));
        unsigned Z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero));
        unsigned other = ~(D | C) & 0xFFFFu;
        int k = 16; /* the first byte that is neither a digit nor a comma */
        if (other) {
            k = CTZ(other);
            unsigned keep = (1u << k) - 1;
            D &= keep, C &= keep, Z &= keep;
            if (p[k] != ']') return NULL;
        }
        unsigned Dx = (D << 3) | prev3;
        if (Dx & (Dx << 1) & (Dx << 2) & (Dx << 3)) return NULL;   /* four digits in a row */
        if (C & ((C << 1) | sep)) return NULL;                      /* a comma after a separator */
        if (zero_open && (D & 1)) return NULL;                      /* 0 then a digit, across blocks */
        unsigned opens = Z & D & ~((D << 1) | digit);              /* zeros opening a number */
        if (opens & (D >> 1)) return NULL;                          /* 0 then a digit */
        if (k < 16) {
            unsigned last_comma = k == 0 ? (sep && p > open + 1) : (C >> (k - 1)) & 1;
            if (last_comma) return NULL;                            /* a bracket after a comma */
            return p + k + 1;
        }
        prev3 = (Dx >> 16) & 7;
        sep = (C >> 15) & 1;
        digit = (D >> 15) & 1;
        zero_open = (opens >> 15) & 1;
        p += 16;
    }
    return byte_list_bytewise(open, end);
}
#else
#define byte_list byte_list_bytewise
#endif

#define BYTES_KEY ",\"bytes\":"
#define BYTES_KEY_LEN 9

/* Past vLLM 0.32's ``,"bytes":[...]`` or ``,"bytes":null`` at p, or p itself when another key
 * or the end of the object follows; NULL when a bytes value is there in another layout. */
static inline const unsigned char *skip_bytes(const unsigned char *p, const unsigned char *end) {
    if (end - p < BYTES_KEY_LEN || memcmp(p, BYTES_KEY, BYTES_KEY_LEN) != 0) return p;
    p += BYTES_KEY_LEN;
    if (end - p >= 4 && memcmp(p, "null", 4) == 0) return p + 4;
    return byte_list(p, end);
}

/* Past an alternative written as an engine writes it, ``{"token":"<plain text>","logprob":<number>}``,
 * with vLLM 0.32's ``,"bytes":[...]`` (or ``null``) before the brace or not (these bytes are valid
 * JSON as they stand: the same the general path accepts), or NULL for anything else (the general
 * path then reads it from p). */
static inline const unsigned char *compact_alt(const unsigned char *p, const unsigned char *end) {
    if (end - p < 10 || memcmp(p, "{\"token\":\"", 10) != 0) return NULL;
    p = skip_plain(p + 10, end);
    if (end - p < 12 || memcmp(p, "\",\"logprob\":", 12) != 0) return NULL;
    int fraction;
    p = number_end(p + 12, end, &fraction);
    if (p == NULL) return NULL;
    if (*p == ',') p = skip_bytes(p, end);
    if (p == NULL || *p != '}') return NULL; /* at end: the NUL after the span */
    return p + 1;
}

static int skip_container(Scan *s, int depth, unsigned char close) {
    if (depth > MAX_DEPTH) return -1;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (read_key(s) < 0) return -1;
            skip_ws(s);
        }
        /* strings and numbers here (no call), containers and literals by skip_value */
        int fraction, bad;
        unsigned char c = *s->p; /* the NUL after the span at its end: skip_value refuses it */
        const unsigned char *past;
        if (c == '{' && close == ']' && depth < MAX_DEPTH && (past = compact_alt(s->p, s->end)) != NULL) {
            s->p = past;
            bad = 0;
        } else if (c == '"') {
            bad = skip_string(s);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            bad = skip_number(s, &fraction);
        } else {
            bad = skip_value(s, depth + 1);
        }
        if (bad < 0) return -1;
        skip_ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (*s->p == close) {
            s->p++;
            return 0;
        }
        return -1;
    }
}

static inline int literal(Scan *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, (size_t)n) != 0) return -1;
    s->p += n;
    return 0;
}

/* Any JSON value at s->p (whitespace before it already skipped), validated and skipped. */
static int skip_value(Scan *s, int depth) {
    if (s->p >= s->end) return -1;
    int fraction;
    switch (*s->p) {
        case '{': return skip_container(s, depth, '}');
        case '[': return skip_container(s, depth, ']');
        case '"': return skip_string(s);
        case 't': return literal(s, "true", 4);
        case 'f': return literal(s, "false", 5);
        case 'n': return literal(s, "null", 4);
        default: return skip_number(s, &fraction);
    }
}

static int grow(Scan *s) {
    Py_ssize_t cap = s->cap ? s->cap * 2 : 256;
    double *fv = PyMem_Realloc(s->fv, (size_t)cap * sizeof(double));
    if (fv == NULL) return -1;
    s->fv = fv;
    Py_ssize_t *starts = PyMem_Realloc(s->starts, (size_t)cap * sizeof(Py_ssize_t));
    if (starts == NULL) return -1;
    s->starts = starts;
    s->cap = cap;
    return 0;
}

/* Whether jb[a:b] is token_id:N as tokens._TOKEN_ID_LIST reads one (0, or 1 to 18 digits
 * without a leading zero). */
static int id_text(const char *t, Py_ssize_t n) {
    if (n < 10 || memcmp(t, "token_id:", 9) != 0) return 0;
    t += 9;
    n -= 9;
    if (t[0] == '0') return n == 1;
    if (n > 18) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return 0;
    }
    return 1;
}

/* A token's string at s->p (its opening quote), validated and appended to jb. */
static int read_token(Scan *s) {
    s->p++;
    Py_ssize_t begin = s->jlen;
    for (;;) {
        /* a run of plain bytes at once */
        const unsigned char *run = s->p, *p = s->p, *end = s->end;
        p = skip_plain(p, end);
        if (p > run) {
            Py_ssize_t n = p - run;
            if (s->jcap - s->jlen < n) return -1;
            if (!s->comma && memchr(run, ',', (size_t)n) != NULL) s->comma = 1;
            memcpy(s->jb + s->jlen, run, (size_t)n);
            s->jlen += n;
            s->p = p;
        }
        if (p >= end) return -1;
        unsigned char c = *p;
        if (c == '"') {
            s->p++;
            break;
        }
        /* jb holds the span's length: no token's text is longer than its escaped bytes, and
         * each separator comma takes the place of at least one structural byte. Checked anyway. */
        if (s->jcap - s->jlen < 4) return -1;
        if (c == '\\') {
            s->p++;
            if (s->p >= s->end) return -1;
            char out;
            switch (*s->p) {
                case '"': out = '"'; break;
                case '\\': out = '\\'; break;
                case '/': out = '/'; break;
                case 'b': out = '\b'; break;
                case 'f': out = '\f'; break;
                case 'n': out = '\n'; break;
                case 'r': out = '\r'; break;
                case 't': out = '\t'; break;
                case 'u': {
                    long cp = read_u_escape(s);
                    if (cp < 0) return -1;
                    char *o = s->jb + s->jlen;
                    if (cp < 0x80) {
                        o[0] = (char)cp;
                        s->jlen += 1;
                        if (cp == ',') s->comma = 1;
                    } else {
                        s->ascii = 0;
                        if (cp < 0x800) {
                            o[0] = (char)(0xC0 | (cp >> 6));
                            o[1] = (char)(0x80 | (cp & 0x3F));
                            s->jlen += 2;
                        } else if (cp < 0x10000) {
                            o[0] = (char)(0xE0 | (cp >> 12));
                            o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                            o[2] = (char)(0x80 | (cp & 0x3F));
                            s->jlen += 3;
                        } else {
                            o[0] = (char)(0xF0 | (cp >> 18));
                            o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                            o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                            o[3] = (char)(0x80 | (cp & 0x3F));
                            s->jlen += 4;
                        }
                    }
                    continue;
                }
                default:
                    return -1;
            }
            s->p++;
            s->jb[s->jlen++] = out;
        } else if (c < 0x20) {
            return -1;
        } else if (c < 0x80) {
            if (c == ',') s->comma = 1;
            s->jb[s->jlen++] = (char)c;
            s->p++;
        } else {
            int n = utf8_len(s->p, s->end);
            if (n == 0) return -1;
            memcpy(s->jb + s->jlen, s->p, (size_t)n);
            s->jlen += n;
            s->p += n;
            s->ascii = 0;
        }
    }
    if (s->ids && !id_text(s->jb + begin, s->jlen - begin)) s->ids = 0;
    return 0;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define MAX_POW5 27
static uint64_t POW5[MAX_POW5 + 1];

/* Whether d (positive, normal) is M / 10**k correctly rounded, strictly (a tie, or d a power of
 * two where the ulp below is half the ulp above, is not decided here). With d = m * 2**E
 * (2**52 <= m < 2**53) it is when |M / 10**k - m * 2**E| < 2**(E-1), that is when
 * |M * 2**(1-E-k) - 2m * 5**k| < 5**k: integers, below 2**127 for s = 1-E-k in [0, 63]. */
static inline int rounds_to(uint64_t M, int k, uint64_t bits) {
#ifndef __SIZEOF_INT128__
    (void)M, (void)k, (void)bits;
    return 0; /* no 128-bit integers: CPython's strtod decides */
#else
    uint64_t m = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    int E = (int)((bits >> 52) & 0x7FF) - 1075;
    if (m == ((uint64_t)1 << 52)) return 0;
    int sh = 1 - E - k;
    if (sh < 0 || sh > 63) return 0;
    unsigned __int128 L = (unsigned __int128)M << sh;
    unsigned __int128 R = (unsigned __int128)(2 * m) * POW5[k];
    unsigned __int128 diff = L > R ? L - R : R - L;
    return diff < (unsigned __int128)POW5[k];
#endif
}

/* The double nearest the number text [p, end) (grammar already checked), exactly, without the
 * general algorithm: 1 and *out set, or 0 (undecided: the caller takes CPython's strtod). */
static int fast_double(const unsigned char *p, const unsigned char *end, double *out) {
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    uint64_t M = 0;
    int digits = 0, scale = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (M == 0 && *p == '0') continue;
        if (++digits > 19) return 0;
        M = M * 10 + (uint64_t)(*p - '0');
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            scale++;
            if (M == 0 && *p == '0') continue;
            if (++digits > 19) return 0;
            M = M * 10 + (uint64_t)(*p - '0');
        }
    }
    int exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (*p == '+' || *p == '-') eneg = *p++ == '-';
        int n = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (++n > 4) return 0;
            exp = exp * 10 + (*p - '0');
        }
        if (eneg) exp = -exp;
    }
    if (M == 0) {
        *out = neg ? -0.0 : 0.0;
        return 1;
    }
    int e10 = exp - scale;
    double d;
    if (e10 >= 0) {
        if (e10 > 22 || M >= ((uint64_t)1 << 53)) return 0;
        d = (double)M * POW10[e10]; /* two exact doubles: one correctly rounded product */
    } else {
        int k = -e10;
        if (k <= 22 && M < ((uint64_t)1 << 53)) {
            d = (double)M / POW10[k]; /* Clinger's fast path: one correctly rounded quotient */
        } else {
            if (k > MAX_POW5) return 0;
            double guess = k <= 22 ? (double)M / POW10[k] : (double)M / POW10[22] / POW10[k - 22];
            if (!(guess > 0) || !isnormal(guess)) return 0;
            uint64_t bits;
            memcpy(&bits, &guess, 8);
            /* the guess or a neighbour (positive and normal: one step of the bits, the exponent
             * field kept away from its ends by the magnitude the caller accepts) */
            if (rounds_to(M, k, bits)) {
            } else if (rounds_to(M, k, bits - 1)) {
                bits -= 1;
            } else if (rounds_to(M, k, bits + 1)) {
                bits += 1;
            } else {
                return 0;
            }
            memcpy(&d, &bits, 8);
        }
    }
    *out = neg ? -d : d;
    return 1;
}

/* A logprob at s->p: a number with a fraction or an exponent, its text short and its size
 * clear of the float limits; parsed by CPython's correctly rounded strtod (as msgspec's). */
static int read_logprob(Scan *s, double *out) {
    const unsigned char *start = s->p;
    int fraction;
    if (skip_number(s, &fraction) < 0 || !fraction) return -1;
    Py_ssize_t n = s->p - start;
    if (n > MAX_NUMBER_TEXT) return -1;
    double v;
    if (fast_double(start, s->p, &v)) {
        double a = v < 0 ? -v : v;
        if (!(a == 0.0 || (a >= 1e-300 && a < 9007199254740992.0))) return -1;
        *out = v;
        return 0;
    }
    char text[MAX_NUMBER_TEXT + 1];
    memcpy(text, start, (size_t)n);
    text[n] = '\0';
    int nonzero = 0;
    for (Py_ssize_t i = 0; i < n && text[i] != 'e' && text[i] != 'E'; i++) {
        if (text[i] >= '1' && text[i] <= '9') {
            nonzero = 1;
            break;
        }
    }
    char *stop = NULL;
    v = PyOS_string_to_double(text, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (stop != text + n) return -1;
    double a = v < 0 ? -v : v;
    if (nonzero ? !(a >= 1e-300 && a < 9007199254740992.0) : a != 0.0) return -1;
    *out = v;
    return 0;
}


/* An entry written as vLLM writes it, ``{"token":"<plain text>","logprob":<number>``, vLLM 0.32's
 * ``,"bytes":[...]`` (or ``null``) or not, ``,"top_logprobs":<value>`` or not, then ``}``: 1 when read (the row added, s->p past it), 0
 * for another layout (nothing changed: read_entry reads it), -1 when its logprob or its
 * alternatives are refused (as read_entry would refuse the same bytes). */
static int compact_entry(Scan *s) {
    const unsigned char *p = s->p, *end = s->end;
    if (end - p < 10 || memcmp(p, "{\"token\":\"", 10) != 0) return 0;
    const unsigned char *tok = p + 10, *q = skip_plain(tok, end);
    if (end - q < 12 || memcmp(q, "\",\"logprob\":", 12) != 0) return 0;
    s->p = q + 12;
    double logprob;
    if (read_logprob(s, &logprob) < 0) return -1;
    if (*s->p == ',') {
        const unsigned char *past = skip_bytes(s->p, end);
        if (past == NULL) { /* a bytes value in another layout: read_entry reads it all again */
            s->p = p;
            return 0;
        }
        s->p = past;
    }
    if (end - s->p >= 16 && memcmp(s->p, ",\"top_logprobs\":", 16) == 0) {
        s->p += 16;
        skip_ws(s);
        if (skip_value(s, 3) < 0) return -1;
        skip_ws(s);
    }
    if (*s->p != '}') { /* another key, or malformed: read_entry reads it all again */
        s->p = p;
        return 0;
    }
    s->p++;
    Py_ssize_t n = q - tok;
    if (s->jcap - s->jlen < n + 1) return -1;
    if (s->rows > 0) s->jb[s->jlen++] = ',';
    s->starts[s->rows] = s->jlen;
    memcpy(s->jb + s->jlen, tok, (size_t)n);
    if (!s->comma && memchr(tok, ',', (size_t)n) != NULL) s->comma = 1;
    if (s->ids && !id_text(s->jb + s->jlen, n)) s->ids = 0;
    s->jlen += n;
    if (logprob > 0) s->nonpos = 0;
    s->fv[s->rows++] = logprob;
    return 1;
}

static int read_entry(Scan *s) {
    if (s->rows == s->cap && grow(s) < 0) return -1;
    int compact = compact_entry(s);
    if (compact != 0) return compact < 0 ? -1 : 0;
    s->p++;
    skip_ws(s);
    int seen = 0;
    double logprob = 0.0;
    if (s->p < s->end && *s->p == '}') return -1; /* no token */
    for (;;) {
        int which = read_key(s);
        if (which < 0 || which == ESCAPED) return -1; /* an escaped key: msgspec reads it */
        if (which & seen) return -1; /* repeated */
        seen |= which;
        skip_ws(s);
        if (s->p >= s->end) return -1;
        if (which == TOKEN) {
            if (*s->p != '"') return -1;
            if (s->rows > 0) {
                if (s->jcap - s->jlen < 1) return -1;
                s->jb[s->jlen++] = ',';
            }
            s->starts[s->rows] = s->jlen;
            if (read_token(s) < 0) return -1;
        } else if (which == LOGPROB) {
            if (read_logprob(s, &logprob) < 0) return -1;
        } else {
            if (skip_value(s, 3) < 0) return -1;
        }
        skip_ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (*s->p == '}') {
            s->p++;
            break;
        }
        return -1;
    }
    if ((seen & (TOKEN | LOGPROB)) != (TOKEN | LOGPROB)) return -1;
    if (logprob > 0) s->nonpos = 0;
    s->fv[s->rows++] = logprob;
    return 0;
}

static int scan(Scan *s) {
    skip_ws(s);
    if (s->p >= s->end || *s->p != '[') return -1;
    s->p++;
    skip_ws(s);
    for (;;) {
        if (s->p >= s->end || *s->p != '{') return -1; /* an empty array or another value */
        if (read_entry(s) < 0) return -1;
        skip_ws(s);
        if (s->p >= s->end) return -1;
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (*s->p == ']') {
            s->p++;
            break;
        }
        return -1;
    }
    skip_ws(s);
    return s->p == s->end ? 0 : -1;
}

static PyObject *text_of(const char *b, Py_ssize_t n, int ascii) {
    if (!ascii) return PyUnicode_DecodeUTF8(b, n, "strict");
    PyObject *str = PyUnicode_New(n, 127);
    if (str != NULL) memcpy(PyUnicode_DATA(str), b, (size_t)n);
    return str;
}

static PyObject *result(Scan *s) {
    PyObject *joined = NULL, *tokens = NULL, *floats = NULL, *out = NULL;
    if (!s->comma) {
        joined = text_of(s->jb, s->jlen, s->ascii);
        if (joined == NULL) goto done;
    } else {
        tokens = PyList_New(s->rows);
        if (tokens == NULL) goto done;
        for (Py_ssize_t i = 0; i < s->rows; i++) {
            /* each token ends where the next one's separator comma is */
            Py_ssize_t a = s->starts[i], b = i + 1 < s->rows ? s->starts[i + 1] - 1 : s->jlen;
            PyObject *t = text_of(s->jb + a, b - a, s->ascii);
            if (t == NULL) goto done;
            PyList_SET_ITEM(tokens, i, t);
        }
    }
    floats = PyBytes_FromStringAndSize((const char *)s->fv, s->rows * (Py_ssize_t)sizeof(double));
    if (floats == NULL) goto done;
    out = Py_BuildValue("(nOOOOO)", s->rows, joined ? joined : Py_None, tokens ? tokens : Py_None, floats,
                        s->nonpos ? Py_True : Py_False, (s->ids && !s->comma) ? Py_True : Py_False);
done:
    Py_XDECREF(joined);
    Py_XDECREF(tokens);
    Py_XDECREF(floats);
    return out;
}

PyObject *rg_sampled_entries(PyObject *module, PyObject *span) {
    (void)module;
    if (!PyBytes_Check(span)) {
        PyErr_SetString(PyExc_TypeError, "sampled_entries() takes bytes");
        return NULL;
    }
    if (!PLAIN['a']) {
        init_tables();
        POW5[0] = 1;
        for (int i = 1; i <= MAX_POW5; i++) POW5[i] = POW5[i - 1] * 5;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(span);
    Scan s;
    memset(&s, 0, sizeof s);
    s.p = (const unsigned char *)PyBytes_AS_STRING(span);
    s.end = s.p + n;
    s.ascii = s.ids = s.nonpos = 1;
    s.jcap = n;
    s.jb = PyMem_Malloc(n > 0 ? (size_t)n : 1);
    PyObject *out = NULL;
    if (s.jb == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (scan(&s) < 0) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    out = result(&s);
done:
    PyMem_Free(s.jb);
    PyMem_Free(s.fv);
    PyMem_Free(s.starts);
    return out;
}
