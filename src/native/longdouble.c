/*
 * Extended-precision float arithmetic for INCRBYFLOAT (and later HINCRBYFLOAT).
 *
 * Why C: Redis computes these increments in C `long double` (the 80-bit x87 format on
 * x86-64 Linux) and prints the sum with "%.17Lf" before trimming trailing zeros. The
 * extra precision is visible to clients: 10.5 + 0.1 prints as 10.6 and 0.1 + 0.2 as 0.3,
 * which no f64 computation reproduces. Rust has no 80-bit float type, so this file does
 * the parse / add / format steps with the C library, exactly as a Redis server would.
 *
 * The Rust side (src/commands/strings.rs) calls `cairn_ld_incr` through `extern "C"` and
 * wraps it in a safe function; nothing here keeps state or allocates.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis refuses to parse numbers whose text is this long or longer, and formats into a
 * buffer of the same size (its MAX_LONG_DOUBLE_CHARS). */
#define CAIRN_LD_MAX_CHARS (5 * 1024)

/* Return codes shared with the Rust wrapper. */
#define CAIRN_LD_OK 0
#define CAIRN_LD_BAD_CURRENT 1
#define CAIRN_LD_BAD_INCR 2
#define CAIRN_LD_NOT_FINITE 3
#define CAIRN_LD_NO_ROOM 4

/* Strict parse with the same acceptance rules as Redis's string2ld: the whole buffer must
 * be consumed by strtold, no leading space, no NaN, no overflow to +-inf and no underflow
 * to zero. "inf", hex floats and a leading '+' are accepted because strtold accepts them. */
static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[CAIRN_LD_MAX_CHARS];
    char *end;
    long double v;

    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    /* An embedded NUL stops strtold early: (end - buf) != len catches it. */
    if (isspace((unsigned char)buf[0]) || *end != '\0' || (size_t)(end - buf) != len)
        return 0;
    if (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO))
        return 0;
    if (errno == EINVAL || isnan(v)) return 0;
    *out = v;
    return 1;
}

/* Formats like Redis's human-friendly long double rendering: "%.17Lf", then trailing
 * zeros after the point (and a bare point) are dropped, and "-0" becomes "0".
 * Returns the length, or 0 if `cap` is too small. */
static size_t format_ld(long double v, char *out, size_t cap) {
    int n;
    size_t l;

    if (isinf(v)) {
        /* Not reachable from INCRBYFLOAT (infinite sums are refused), kept for safety. */
        const char *t = v > 0 ? "inf" : "-inf";
        l = strlen(t);
        if (l + 1 > cap) return 0;
        memcpy(out, t, l + 1);
        return l;
    }
    n = snprintf(out, cap, "%.17Lf", v);
    if (n < 0 || (size_t)n + 1 > cap) return 0;
    l = (size_t)n;
    if (memchr(out, '.', l) != NULL) {
        while (l > 0 && out[l - 1] == '0') l--;
        if (l > 0 && out[l - 1] == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    out[l] = '\0';
    return l;
}

/*
 * current (may be NULL: a missing key counts as 0) + incr, formatted into out.
 * On CAIRN_LD_OK, *out_len is the text's length (no NUL counted).
 */
int cairn_ld_incr(const char *current, size_t current_len, const char *incr, size_t incr_len,
                  char *out, size_t out_cap, size_t *out_len) {
    long double value = 0.0L, delta;
    size_t l;

    if (current != NULL && !parse_ld(current, current_len, &value)) return CAIRN_LD_BAD_CURRENT;
    if (!parse_ld(incr, incr_len, &delta)) return CAIRN_LD_BAD_INCR;
    value += delta;
    if (isnan(value) || isinf(value)) return CAIRN_LD_NOT_FINITE;
    l = format_ld(value, out, out_cap);
    if (l == 0) return CAIRN_LD_NO_ROOM;
    *out_len = l;
    return CAIRN_LD_OK;
}

/* Exposed for tests and for callers that need the parse alone (same rules as above). */
int cairn_ld_valid(const char *s, size_t len) {
    long double v;
    return parse_ld(s, len, &v);
}
