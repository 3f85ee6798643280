/* The near-miss pass's system-text comparison (analysis/near_miss._SystemGrams.similar): the word
 * 3-gram counts of two ASCII texts, exactly as the word-tuple sets of str.split() give them.
 *
 * Words are what str.split() cuts an ASCII text into: runs of bytes other than its ASCII
 * whitespace (9-13, 28-32; a NUL is a word byte, as it is for str.split). Equal words, and only
 * those, get one number (a hash table whose entries are compared byte for byte), and a 3-gram is its
 * three numbers packed into 63 bits, one-to-one while the pair has fewer than 2**21 words. Each
 * side's distinct 3-grams go into a set (open addressing on the packed value), so the counts are
 * those of the tuple sets: the distinct 3-grams of each side and those in both. A byte >= 0x80, a
 * side under 20 words (its words are compared, not its 3-grams) or 2**21 words or more: None.
 * Every read is bounded by the buffers' lengths; the tables are sized by the words found, which the
 * buffers' own lengths bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "speedups.h"

const char rg_gram_counts_doc[] =
    "gram_counts(a: bytes, b: bytes) -> tuple[int, int] | None\n\n"
    "The word 3-grams of two ASCII texts (str.split's words): (distinct 3-grams in both, distinct\n"
    "3-grams of a plus those of b), or None (a byte >= 0x80, a side under 20 words, 2**21 words).";

#define RG_MIN_WORDS 20
#define RG_NUMBER_BITS 21

/* str.split's classes of an ASCII byte: 0 a word's byte, 1 whitespace, 2 a byte >= 0x80. */
static unsigned char rg_class[256];
static int rg_class_ready = 0;

static void rg_class_init(void) {
    if (rg_class_ready) {
        return;
    }
    for (int c = 9; c <= 13; c++) {
        rg_class[c] = 1;
    }
    for (int c = 28; c <= 32; c++) {
        rg_class[c] = 1;
    }
    for (int c = 0x80; c < 256; c++) {
        rg_class[c] = 2;
    }
    rg_class_ready = 1;
}

#define RG_MIX 0x9E3779B97F4A7C15ULL

typedef struct {
    const unsigned char *start;
    uint64_t head; /* its first 8 bytes (fewer: the rest 0) */
    uint32_t length;
    uint32_t check; /* 32 bits of its hash */
} rg_word;

/* The numbering of one pair's words: a table of 2**bits slots, each 0 (empty) or a word's check
 * (high 32 bits) and its index + 1 (low 32 bits). */
typedef struct {
    rg_word *words;
    uint32_t *numbers;
    uint64_t *table;
    int shift; /* 64 - bits */
    size_t mask;
    Py_ssize_t count;
    uint32_t next;
} rg_numbering;

static uint64_t rg_load(const unsigned char *p, Py_ssize_t available, Py_ssize_t length) {
    /* length (1-8) bytes at p, little-endian, the rest 0; available bytes may be read at p */
    uint64_t v = 0;
    if (available >= 8) {
        memcpy(&v, p, 8);
        if (length < 8) {
            v &= (((uint64_t)1) << (8 * length)) - 1;
        }
        return v;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

/* Number the word text[start:end] (end <= n). */
static void rg_add_word(rg_numbering *nb, const unsigned char *text, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t length = end - start;
    const unsigned char *p = text + start;
    uint64_t head = rg_load(p, n - start, length < 8 ? length : 8);
    uint64_t h = (head + (uint64_t)length) * RG_MIX;
    for (Py_ssize_t at = 8; at < length; at += 8) {
        Py_ssize_t piece = length - at < 8 ? length - at : 8;
        h = ((h ^ (h >> 31)) ^ rg_load(p + at, n - start - at, piece)) * RG_MIX;
    }
    h ^= h >> 29;
    uint32_t check = (uint32_t)h;
    Py_ssize_t w = nb->count++;
    rg_word *word = &nb->words[w];
    word->start = p;
    word->head = head;
    word->length = (uint32_t)length;
    word->check = check;
    size_t slot = (size_t)((h * RG_MIX) >> nb->shift) & nb->mask;
    for (;;) {
        uint64_t held = nb->table[slot];
        if (held == 0) {
            nb->table[slot] = ((uint64_t)check << 32) | (uint64_t)(w + 1);
            nb->numbers[w] = nb->next++;
            return;
        }
        if ((uint32_t)(held >> 32) == check) {
            Py_ssize_t other = (Py_ssize_t)(uint32_t)held - 1;
            const rg_word *seen = &nb->words[other];
            if (seen->length == word->length && seen->head == head &&
                (length <= 8 || memcmp(seen->start + 8, p + 8, (size_t)(length - 8)) == 0)) {
                nb->numbers[w] = nb->numbers[other];
                return;
            }
        }
        slot = (slot + 1) & nb->mask;
    }
}

/* Split text[0:n] as str.split() does and number its words; their count, or -1 on a byte >= 0x80. */
static Py_ssize_t rg_split(rg_numbering *nb, const unsigned char *text, Py_ssize_t n) {
    Py_ssize_t first = nb->count;
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = rg_class[text[i]];
        if (c == 1) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        while (i < n && (c = rg_class[text[i]]) == 0) {
            i++;
        }
        if (i < n && c == 2) {
            return -1;
        }
        rg_add_word(nb, text, n, start, i);
    }
    return nb->count - first;
}

static size_t rg_table_size(size_t items) {
    size_t size = 16;
    while (size < 2 * items) {
        size <<= 1;
    }
    return size;
}

/* A set of packed 3-grams: 0 is empty (a key is its packed value + 1). */
typedef struct {
    uint64_t *keys;
    size_t mask;
    int shift; /* 64 - log2 of its slots */
} rg_set;

/* A set for items 3-grams on size slots at keys (zeroed here). */
static void rg_set_init(rg_set *set, uint64_t *keys, size_t size) {
    memset(keys, 0, size * sizeof(uint64_t));
    set->keys = keys;
    set->mask = size - 1;
    set->shift = 64;
    while (size > 1) {
        set->shift--;
        size >>= 1;
    }
}

/* 1 when key was added, 0 when it was there. */
static int rg_set_add(rg_set *set, uint64_t key) {
    size_t at = (size_t)((key * RG_MIX) >> set->shift);
    for (;;) {
        uint64_t held = set->keys[at];
        if (held == 0) {
            set->keys[at] = key;
            return 1;
        }
        if (held == key) {
            return 0;
        }
        at = (at + 1) & set->mask;
    }
}

static int rg_set_has(const rg_set *set, uint64_t key) {
    size_t at = (size_t)((key * RG_MIX) >> set->shift);
    for (;;) {
        uint64_t held = set->keys[at];
        if (held == 0) {
            return 0;
        }
        if (held == key) {
            return 1;
        }
        at = (at + 1) & set->mask;
    }
}

static inline uint64_t rg_gram(const uint32_t *numbers, Py_ssize_t i) {
    return (((uint64_t)numbers[i] << (2 * RG_NUMBER_BITS)) | ((uint64_t)numbers[i + 1] << RG_NUMBER_BITS) |
            (uint64_t)numbers[i + 2]) +
           1;
}

/* The working memory of one call: a block kept between calls up to RG_KEPT bytes (the GIL is held
 * throughout a call, so one block serves every call), a larger one allocated and freed. (Fresh
 * memory for each call cost more in page faults than the counting.) */
#define RG_KEPT ((size_t)1 << 20)
static unsigned char *rg_kept = NULL;
static size_t rg_kept_size = 0;

static unsigned char *rg_scratch(size_t need) {
    if (need > RG_KEPT) {
        return malloc(need);
    }
    if (need > rg_kept_size) {
        unsigned char *grown = malloc(RG_KEPT < 2 * need ? RG_KEPT : 2 * need);
        if (grown == NULL) {
            return NULL;
        }
        free(rg_kept);
        rg_kept = grown;
        rg_kept_size = RG_KEPT < 2 * need ? RG_KEPT : 2 * need;
    }
    return rg_kept;
}

static void rg_scratch_done(unsigned char *block) {
    if (block != rg_kept) {
        free(block);
    }
}

PyObject *rg_gram_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "gram_counts() takes two bytes");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "gram_counts() takes bytes");
        return NULL;
    }
    rg_class_init();
    const unsigned char *text_a = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *text_b = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t len_a = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t len_b = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t room = len_a / 2 + 1 + len_b / 2 + 1; /* a word and its space take 2 bytes, but the last */
    if (room >= ((Py_ssize_t)1 << RG_NUMBER_BITS)) {
        Py_RETURN_NONE; /* (the words could not all have 21-bit numbers) */
    }
    rg_numbering nb = {NULL, NULL, NULL, 0, 0, 0, 0};
    size_t size = rg_table_size((size_t)room);
    int bits = 0;
    while (((size_t)1 << bits) < size) {
        bits++;
    }
    nb.shift = 64 - bits;
    nb.mask = size - 1;
    size_t size_a = rg_table_size((size_t)(len_a / 2 + 1)), size_b = rg_table_size((size_t)(len_b / 2 + 1));
    /* one block: the table and both sets (u64), the words, their numbers */
    size_t need = (size + size_a + size_b) * sizeof(uint64_t) + (size_t)room * (sizeof(rg_word) + sizeof(uint32_t));
    unsigned char *block = rg_scratch(need);
    if (block == NULL) {
        return PyErr_NoMemory();
    }
    nb.table = (uint64_t *)block;
    uint64_t *keys_a = nb.table + size, *keys_b = keys_a + size_a;
    nb.words = (rg_word *)(keys_b + size_b);
    nb.numbers = (uint32_t *)(nb.words + room);
    memset(nb.table, 0, size * sizeof(uint64_t));
    rg_set set_a, set_b;
    PyObject *result = NULL;
    Py_ssize_t n_a = rg_split(&nb, text_a, len_a);
    if (n_a < RG_MIN_WORDS) { /* (-1: a byte >= 0x80) */
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t n_b = rg_split(&nb, text_b, len_b);
    if (n_b < RG_MIN_WORDS) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    rg_set_init(&set_a, keys_a, rg_table_size((size_t)n_a));
    rg_set_init(&set_b, keys_b, rg_table_size((size_t)n_b));
    const uint32_t *numbers = nb.numbers;
    Py_ssize_t distinct = 0, shared = 0;
    for (Py_ssize_t i = 0; i + 2 < n_a; i++) {
        distinct += rg_set_add(&set_a, rg_gram(numbers, i));
    }
    const uint32_t *numbers_b = numbers + n_a;
    for (Py_ssize_t i = 0; i + 2 < n_b; i++) {
        uint64_t key = rg_gram(numbers_b, i);
        if (rg_set_add(&set_b, key)) {
            distinct++;
            shared += rg_set_has(&set_a, key);
        }
    }
    result = Py_BuildValue("(nn)", shared, distinct);
done:
    rg_scratch_done(block);
    return result;
}
