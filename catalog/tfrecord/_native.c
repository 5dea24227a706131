/* catalog.tfrecord._native: the few per-record loops that Python pays for most, in C.
 *
 * Optional: setup.py builds it when a C compiler is there (optional=True), and
 * catalog/tfrecord/native.py falls back to the pure-Python code (same results) when it is not, or
 * when CATALOG_NATIVE=0. Plain CPython C API and the buffer protocol only (no NumPy
 * headers), so it builds against any CPython >= 3.10 with any C99 compiler.
 *
 *   crc32c_ranges(buf, starts, ends) -> bytes   CRC32C of each buf[starts[i]:ends[i]],
 *                                                as native-order uint32s
 *   slices(buf, starts, ends) -> list[bytes]     each buf[starts[i]:ends[i]] as bytes
 *   join_ranges(buf, starts, ends) -> bytes      those ranges back to back in one bytes
 *   parse_example(data) -> dict | None           a tf.train.Example as {name: (kind, values)},
 *                                                or None when its layout is not the regular
 *                                                one serializers write (the caller's protobuf
 *                                                path then decides, and raises its errors)
 *   pread_ranges(fds, starts, ends, pad) -> bytes | None
 *                                                bytes starts[k]..ends[k] of file fds[k], each k,
 *                                                joined, then pad zero bytes; None when a read
 *                                                fails or comes back short (the caller's own
 *                                                reads then say which and why)
 *   float32_figures(buf) -> tuple | None         zeros, min, max, mean, m2 of finite float32s
 *   digest_sums(values, coefficients) -> bytes | None
 *                                                multilinear sums of bytes values (stats.digest)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <errno.h>
#include <unistd.h>
#endif

/* ------------------------------------------------------------------ CRC32C (Castagnoli) */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* slicing-by-8: eight table lookups per 8 bytes (little- or big-endian hosts alike) */
static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
              crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
/* SSE4.2's crc32 instruction computes exactly CRC32C; chosen at run time (cpuid) */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

/* Three buffers' CRCs at once: the instruction takes 3 cycles but a new one can start every
 * cycle, so three independent chains run in the time of one (records are independent). */
__attribute__((target("sse4.2"))) static void crc_hw3(const unsigned char *const p[3], const size_t n[3],
                                                        uint32_t out[3]) {
    uint64_t c0 = 0xFFFFFFFFu, c1 = 0xFFFFFFFFu, c2 = 0xFFFFFFFFu;
    size_t common = n[0] < n[1] ? n[0] : n[1];
    common = (common < n[2] ? common : n[2]) & ~(size_t)7;
    for (size_t k = 0; k < common; k += 8) {
        uint64_t w0, w1, w2;
        memcpy(&w0, p[0] + k, 8);
        memcpy(&w1, p[1] + k, 8);
        memcpy(&w2, p[2] + k, 8);
        c0 = __builtin_ia32_crc32di(c0, w0);
        c1 = __builtin_ia32_crc32di(c1, w1);
        c2 = __builtin_ia32_crc32di(c2, w2);
    }
    /* crc_hw continues from a finished CRC: hand it each chain's state, inverted back */
    out[0] = crc_hw(~(uint32_t)c0, p[0] + common, n[0] - common);
    out[1] = crc_hw(~(uint32_t)c1, p[1] + common, n[1] - common);
    out[2] = crc_hw(~(uint32_t)c2, p[2] + common, n[2] - common);
}
#endif

static uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t) = crc_soft;

/* ------------------------------------------------------------------ helpers */

/* The int64 index arrays' buffers, checked against the data's length. */
typedef struct {
    Py_buffer data, starts, ends;
    Py_ssize_t n;
} Ranges;

static void ranges_release(Ranges *r) {
    if (r->data.obj) PyBuffer_Release(&r->data);
    if (r->starts.obj) PyBuffer_Release(&r->starts);
    if (r->ends.obj) PyBuffer_Release(&r->ends);
}

static int get_index(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != 8 || view->format == NULL || (strcmp(view->format, "q") && strcmp(view->format, "l") &&
                                                         strcmp(view->format, "<q") && strcmp(view->format, "<l") &&
                                                         strcmp(view->format, "=q") && strcmp(view->format, "=l"))) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int64 array", what);
        return -1;
    }
    return 0;
}

static int ranges_of(PyObject *data, PyObject *starts, PyObject *ends, Ranges *r) {
    memset(r, 0, sizeof(*r));
    if (PyObject_GetBuffer(data, &r->data, PyBUF_SIMPLE) < 0) goto fail;
    if (get_index(starts, &r->starts, "starts") < 0 || get_index(ends, &r->ends, "ends") < 0) goto fail;
    if (r->starts.len != r->ends.len) {
        PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
        goto fail;
    }
    r->n = r->starts.len / 8;
    const int64_t *s = r->starts.buf, *e = r->ends.buf;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        if (s[i] < 0 || s[i] > e[i] || e[i] > (int64_t)r->data.len) {
            PyErr_Format(PyExc_ValueError, "range %zd [%lld, %lld) is outside the buffer of %zd bytes", i,
                         (long long)s[i], (long long)e[i], r->data.len);
            goto fail;
        }
    }
    return 0;
fail:
    ranges_release(r);
    return -1;
}

static int ranges_get(PyObject *args, Ranges *r) {
    PyObject *data, *starts, *ends;
    memset(r, 0, sizeof(*r));
    if (!PyArg_ParseTuple(args, "OOO", &data, &starts, &ends)) return -1;
    return ranges_of(data, starts, ends, r);
}

/* ------------------------------------------------------------------ crc32c_ranges, slices */

static PyObject *crc32c_ranges(PyObject *self, PyObject *args) {
    Ranges r;
    if (ranges_get(args, &r) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, r.n * 4);
    if (out != NULL) {
        uint32_t *crcs = (uint32_t *)PyBytes_AS_STRING(out);
        const unsigned char *buf = r.data.buf;
        /* read once each and checked again: without the GIL another thread may change them */
        const volatile int64_t *s = r.starts.buf, *e = r.ends.buf;
        Py_ssize_t i = 0;
        Py_BEGIN_ALLOW_THREADS;
#ifdef HAVE_HW_CRC
        for (; crc_fn == crc_hw && i + 3 <= r.n; i += 3) {
            const unsigned char *p[3];
            size_t n[3];
            int k = 0;
            for (; k < 3; k++) {
                int64_t a = s[i + k], b = e[i + k];
                if (a < 0 || a > b || b > (int64_t)r.data.len) break;
                p[k] = buf + a, n[k] = (size_t)(b - a);
            }
            if (k < 3) break; /* the single loop below finds which one */
            crc_hw3(p, n, crcs + i);
        }
#endif
        for (; i < r.n; i++) {
            int64_t a = s[i], b = e[i];
            if (a < 0 || a > b || b > (int64_t)r.data.len) break;
            crcs[i] = crc_fn(0, buf + a, (size_t)(b - a));
        }
        Py_END_ALLOW_THREADS;
        if (i < r.n) {
            PyErr_Format(PyExc_ValueError, "range %zd changed while its CRC was taken", i);
            Py_CLEAR(out);
        }
    }
    ranges_release(&r);
    return out;
}

static PyObject *crc32c_one(PyObject *self, PyObject *args) {
    Py_buffer data;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &crc)) return NULL;
    uint32_t out = crc_fn(crc, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(out);
}

/* ------------------------------------------------------------------ pread_ranges */

#ifndef _WIN32
/* Read each range in turn into out (room for `room` bytes); 0, or -1 when a read failed or
 * came back short, or a range no longer fits (the arrays were changed by another thread). */
static int read_all(char *out, Py_ssize_t room, const volatile int64_t *fds, const volatile int64_t *s,
                    const volatile int64_t *e, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t fd = fds[i], at = s[i], want = e[i] - at;
        if (fd < 0 || fd > INT32_MAX || at < 0 || want < 0 || want > room) return -1;
        room -= want;
        while (want > 0) {
            ssize_t got = pread((int)fd, out, (size_t)want, (off_t)at);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return -1;
            out += got, at += got, want -= got;
        }
    }
    return 0;
}
#endif

static PyObject *pread_ranges(PyObject *self, PyObject *args) {
    PyObject *fds_obj, *starts, *ends;
    Py_ssize_t pad;
    if (!PyArg_ParseTuple(args, "OOOn", &fds_obj, &starts, &ends, &pad)) return NULL;
#ifdef _WIN32
    Py_RETURN_NONE; /* no pread: the caller reads the ranges itself */
#else
    Py_buffer fds = {0}, s = {0}, e = {0};
    PyObject *out = NULL;
    if (get_index(fds_obj, &fds, "fds") < 0 || get_index(starts, &s, "starts") < 0 || get_index(ends, &e, "ends") < 0)
        goto done;
    Py_ssize_t n = s.len / 8, total = 0;
    if (fds.len != s.len || e.len != s.len || pad < 0) {
        PyErr_SetString(PyExc_ValueError, "fds, starts and ends differ in length, or pad < 0");
        goto done;
    }
    const int64_t *sv = s.buf, *ev = e.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sv[i] < 0 || ev[i] < sv[i] || ev[i] - sv[i] > PY_SSIZE_T_MAX - pad - total) {
            PyErr_Format(PyExc_ValueError, "range %zd [%lld, %lld) is not a range of a file", i, (long long)sv[i],
                         (long long)ev[i]);
            goto done;
        }
        total += (Py_ssize_t)(ev[i] - sv[i]);
    }
    out = PyBytes_FromStringAndSize(NULL, total + pad);
    if (out == NULL) goto done;
    char *buf = PyBytes_AS_STRING(out);
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = read_all(buf, total, fds.buf, s.buf, e.buf, n);
    Py_END_ALLOW_THREADS;
    memset(buf + total, 0, (size_t)pad);
    if (rc < 0) {
        Py_CLEAR(out);
        out = Py_None;
        Py_INCREF(out);
    }
done:
    if (fds.obj) PyBuffer_Release(&fds);
    if (s.obj) PyBuffer_Release(&s);
    if (e.obj) PyBuffer_Release(&e);
    return out;
#endif
}


/* ------------------------------------------------------------------ TFRecord framing */

static uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* scan_records(buf, pos, verify) -> (records, pos, cut, bad_header, bad_data)
 * Every whole record framed in buf from pos: its data as bytes; the position after the last;
 * cut: the data length (a u64) of a record that starts there but does not end in buf (-1: none);
 * bad_header: the offset of a header whose length CRC fails, where the scan stopped (-1: none);
 * bad_data: the header offset of the first record whose data CRC fails (-1: none). With
 * verify false, no CRC is checked. */
static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int verify;
    if (!PyArg_ParseTuple(args, "y*np", &view, &pos, &verify)) return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    long long bad_header = -1, bad_data = -1;
    uint64_t cut = 0;
    int was_cut = 0;
    PyObject *out = PyList_New(0);
    while (out != NULL && pos >= 0 && pos <= end - 12) { /* pos + 12 would overflow near 2**63 */
        uint64_t n = le64(buf + pos);
        if (verify && masked(crc_fn(0, buf + pos, 8)) != le32(buf + pos + 8)) {
            bad_header = pos;
            break;
        }
        if (end - pos < 16 || n > (uint64_t)(end - pos - 16)) {
            cut = n;
            was_cut = 1;
            break;
        }
        const unsigned char *data = buf + pos + 12;
        if (verify && bad_data < 0 && masked(crc_fn(0, data, n)) != le32(data + n)) bad_data = pos;
        PyObject *item = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)n);
        if (item == NULL || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
        pos += 16 + (Py_ssize_t)n;
    }
    PyBuffer_Release(&view);
    if (out == NULL) return NULL;
    if (!was_cut) return Py_BuildValue("NniLL", out, pos, -1, bad_header, bad_data);
    return Py_BuildValue("NnKLL", out, pos, (unsigned long long)cut, bad_header, bad_data);
}

/* walk_records(buf, end) -> (at, lengths, pos): the records wholly in buf[:end] by their
 * lengths alone (the caller checks their CRCs): header offsets and data lengths as int64
 * bytes, and where the first record not wholly there starts. */
static PyObject *walk_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t end;
    if (!PyArg_ParseTuple(args, "y*n", &view, &end)) return NULL;
    if (end < 0 || end > view.len) end = view.len;
    const unsigned char *buf = view.buf;
    Py_ssize_t pos = 0, count = 0, cap = 1024;
    int64_t *at = PyMem_Malloc(cap * 8), *lens = PyMem_Malloc(cap * 8);
    PyObject *result = NULL;
    if (at == NULL || lens == NULL) goto done;
    while (pos + 16 <= end) {
        uint64_t n = le64(buf + pos);
        if (n > (uint64_t)(end - pos - 16)) break;
        if (count == cap) {
            cap *= 2;
            int64_t *a2 = PyMem_Realloc(at, cap * 8), *l2 = a2 ? PyMem_Realloc(lens, cap * 8) : NULL;
            if (a2) at = a2;
            if (l2) lens = l2;
            if (!a2 || !l2) goto done;
        }
        at[count] = pos;
        lens[count++] = (int64_t)n;
        pos += 16 + (Py_ssize_t)n;
    }
    result = Py_BuildValue("y#y#n", (const char *)at, count * 8, (const char *)lens, count * 8, pos);
done:
    if (result == NULL && !PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(at);
    PyMem_Free(lens);
    PyBuffer_Release(&view);
    return result;
}

/* header_fault(buf, at, lengths) -> int: the first record whose 12-byte header at buf[at[i]]
 * does not hold lengths[i] and the masked CRC32C of those 8 bytes (or whose header, data and
 * footer would run past the buffer); -1 when every header is right. */
static PyObject *header_fault(PyObject *self, PyObject *args) {
    Ranges r; /* (buf, at, lengths): "ends" holds the lengths here */
    PyObject *data, *at, *lengths;
    if (!PyArg_ParseTuple(args, "OOO", &data, &at, &lengths)) return NULL;
    memset(&r, 0, sizeof(r));
    if (PyObject_GetBuffer(data, &r.data, PyBUF_SIMPLE) < 0) return NULL;
    if (get_index(at, &r.starts, "at") < 0 || get_index(lengths, &r.ends, "lengths") < 0 || r.starts.len != r.ends.len) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "at and lengths differ in length");
        ranges_release(&r);
        return NULL;
    }
    const unsigned char *buf = r.data.buf;
    const int64_t *a = r.starts.buf, *n = r.ends.buf;
    Py_ssize_t count = r.starts.len / 8, bad = -1;
    int64_t size = (int64_t)r.data.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t p = a[i], len = n[i];
        if (p < 0 || len < 0 || p > size - 16 || len > size - 16 - p || le64(buf + p) != (uint64_t)len ||
            le32(buf + p + 8) != masked(crc_fn(0, buf + p, 8))) {
            bad = i;
            break;
        }
    }
    ranges_release(&r);
    return PyLong_FromSsize_t(bad);
}

/* Each range of buf as bytes, or (text) decoded as UTF-8, in a list; with text, None when
 * one range is not UTF-8. */
static PyObject *ranges_list(PyObject *args, int text) {
    Ranges r;
    if (ranges_get(args, &r) < 0) return NULL;
    PyObject *out = PyList_New(r.n);
    const char *buf = r.data.buf;
    const int64_t *s = r.starts.buf, *e = r.ends.buf;
    for (Py_ssize_t i = 0; out != NULL && i < r.n; i++) {
        Py_ssize_t n = (Py_ssize_t)(e[i] - s[i]);
        PyObject *item = text ? PyUnicode_DecodeUTF8(buf + s[i], n, NULL) : PyBytes_FromStringAndSize(buf + s[i], n);
        if (item != NULL) {
            PyList_SET_ITEM(out, i, item);
            continue;
        }
        Py_CLEAR(out);
        if (text && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            out = Py_None;
            Py_INCREF(out);
            break;
        }
    }
    ranges_release(&r);
    return out;
}

/* join_ranges(buf, starts, ends) -> bytes: the ranges buf[starts[i]:ends[i]] back to back, in
 * one bytes (a filter's kept records, framing and all: no bytes object a range). */
static PyObject *join_ranges(PyObject *self, PyObject *args) {
    Ranges r;
    if (ranges_get(args, &r) < 0) return NULL;
    const int64_t *s = r.starts.buf, *e = r.ends.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < r.n; i++) total += (Py_ssize_t)(e[i] - s[i]); /* each within the buffer: no overflow */
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out != NULL) {
        char *p = PyBytes_AS_STRING(out);
        const char *buf = r.data.buf;
        for (Py_ssize_t i = 0; i < r.n; i++) {
            memcpy(p, buf + s[i], (size_t)(e[i] - s[i]));
            p += e[i] - s[i];
        }
    }
    ranges_release(&r);
    return out;
}

static PyObject *slices(PyObject *self, PyObject *args) { return ranges_list(args, 0); }

/* The TFRecord framing around the len data bytes at at + 12: the length and its masked CRC32C
 * before them, the data's masked CRC32C after (at + 12 + len). */
static void frame_around(unsigned char *at, size_t len) {
    for (int b = 0; b < 8; b++) at[b] = (unsigned char)((uint64_t)len >> (8 * b));
    uint32_t hc = masked(crc_fn(0, at, 8)), dc = masked(crc_fn(0, at + 12, len));
    for (int b = 0; b < 4; b++) {
        at[8 + b] = (unsigned char)(hc >> (8 * b));
        at[12 + len + b] = (unsigned char)(dc >> (8 * b));
    }
}

/* frame_records(records) -> (framed, lengths): the records (bytes, in a list or tuple) framed
 * as TFRecord back to back (u64 length, its masked CRC32C, the data, the data's masked
 * CRC32C), and their lengths as native uint64s (a writer's record index). The GIL is held:
 * the list is not copied, so no other thread may change it meanwhile. */
static PyObject *frame_records(PyObject *self, PyObject *arg) {
    PyObject *fast = PySequence_Fast(arg, "records must be a list or tuple of bytes"), *out = NULL, *lens = NULL;
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), total = 0;
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "records must be a list or tuple of bytes");
            goto done;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
        if (len > PY_SSIZE_T_MAX - 16 - total) {
            PyErr_SetString(PyExc_OverflowError, "the framed records would not fit in memory");
            goto done;
        }
        total += len + 16;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    lens = PyBytes_FromStringAndSize(NULL, n * 8); /* (n * 8 <= total: no overflow) */
    if (out == NULL || lens == NULL) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    uint64_t *sizes = (uint64_t *)PyBytes_AS_STRING(lens);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
        sizes[i] = (uint64_t)len;
        memcpy(p + 12, PyBytes_AS_STRING(items[i]), (size_t)len);
        frame_around(p, (size_t)len);
        p += len + 16;
    }
    Py_DECREF(fast);
    PyObject *result = PyTuple_Pack(2, out, lens);
    Py_DECREF(out);
    Py_DECREF(lens);
    return result;
done:
    Py_DECREF(fast);
    Py_XDECREF(out);
    Py_XDECREF(lens);
    return NULL;
}

static PyObject *texts(PyObject *self, PyObject *args) { return ranges_list(args, 1); }

/* ------------------------------------------------------------------ encode_plain */

/* encode_plain(columns, n, framed) -> (buf, starts, ends), or None
 * Examples of n rows whose features are all plain scalars, written as the encoders write them
 * (map entries in the columns' order). columns: a sequence of (key bytes, kind, values, sizes)
 * with kind 0 an int64 (values: n non-negative int64s), 1 a float32 (values: n float32s), 2 a
 * text (values: the UTF-8 bytes of all, sizes: n int64 byte counts), 3 a text (values: a
 * sequence of n str, their UTF-8 taken where Python keeps it; sizes unused). With framed, each
 * record has its TFRecord header and footer around it and buf is the framed records back to
 * back; starts/ends (int64 bytes) locate each record's own bytes in buf. None when a kind 3
 * value is not exactly a str or has no UTF-8 (a lone surrogate): the encoders' business. */

static inline Py_ssize_t varint_len(uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
    return (Py_ssize_t)((64 - __builtin_clzll(v | 1)) + 6) / 7; /* seven bits a byte */
#else
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
#endif
}

static unsigned char *put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* a length-delimited field's size with its one-byte tag */
static Py_ssize_t field_len(Py_ssize_t n) { return 1 + varint_len((uint64_t)n) + n; }

static unsigned char *put_head(unsigned char *p, unsigned char tag, Py_ssize_t n) {
    *p++ = tag;
    return put_varint(p, (uint64_t)n);
}

typedef struct {
    Py_buffer key, values, sizes;
    int kind;
    PyObject *strs;          /* kind 3: the values as a list or tuple (a reference held) */
    const char **text;       /* texts: where each one's UTF-8 starts */
    const Py_ssize_t *size;  /* and how many bytes it has */
    unsigned char *pre;      /* the entry's bytes before a value of size s < PREFIX_SIZES, */
    Py_ssize_t *pre_len;     /* at pre + s * pre_room, pre_len[s] of them (0: not made yet) */
    Py_ssize_t pre_room;
} Column;

/* Value sizes whose entry prefix (the map entry's, key's, Feature's and list's heads) is made
 * once a column: every varint and float, texts of up to 127 bytes. */
#define PREFIX_SIZES 128

static void columns_release(Column *cols, Py_ssize_t k) {
    for (Py_ssize_t c = 0; c < k; c++) {
        if (cols[c].key.obj) PyBuffer_Release(&cols[c].key);
        if (cols[c].values.obj) PyBuffer_Release(&cols[c].values);
        if (cols[c].sizes.obj) PyBuffer_Release(&cols[c].sizes);
        Py_XDECREF(cols[c].strs);
        PyMem_Free((void *)cols[c].text);
        PyMem_Free((void *)cols[c].size);
        PyMem_Free(cols[c].pre);
        PyMem_Free(cols[c].pre_len);
    }
    PyMem_Free(cols);
}

/* Room for a text column's pointers and sizes; -1 (an error set) when memory runs out. */
static int texts_alloc(Column *col, Py_ssize_t n) {
    col->text = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*col->text));
    col->size = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*col->size));
    if (col->text == NULL || col->size == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Kind 2: the texts' UTF-8 back to back in values, their sizes in sizes. */
static int joined_texts(Column *col, PyObject *sizes, Py_ssize_t n) {
    if (PyObject_GetBuffer(sizes, &col->sizes, PyBUF_SIMPLE) < 0) return -1;
    if (col->sizes.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "a text column's sizes do not fit n rows");
        return -1;
    }
    if (texts_alloc(col, n) < 0) return -1;
    const int64_t *sz = col->sizes.buf;
    Py_ssize_t *size = (Py_ssize_t *)col->size;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sz[i] < 0 || sz[i] > (int64_t)col->values.len - total) {
            PyErr_SetString(PyExc_ValueError, "a text column's sizes run past its bytes");
            return -1;
        }
        col->text[i] = (const char *)col->values.buf + total;
        size[i] = (Py_ssize_t)sz[i];
        total += sz[i];
    }
    return 0;
}

/* Kind 3: a sequence of str; 1 when a value is not exactly a str or has no UTF-8 (no error
 * left set: the caller's generic path judges it). The values are copied into a list of our
 * own (a pointer each), which nothing else can change while the column is used and which
 * keeps each str, and so its UTF-8, alive. */
static int str_texts(Column *col, PyObject *values, Py_ssize_t n) {
    col->strs = PySequence_List(values);
    if (col->strs == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(col->strs) != n) {
        PyErr_SetString(PyExc_ValueError, "a column's kind or values do not fit n rows");
        return -1;
    }
    if (texts_alloc(col, n) < 0) return -1;
    PyObject **items = PySequence_Fast_ITEMS(col->strs);
    Py_ssize_t *size = (Py_ssize_t *)col->size;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(items[i])) return 1;
        col->text[i] = PyUnicode_AsUTF8AndSize(items[i], &size[i]);
        if (col->text[i] == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1; /* memory */
            PyErr_Clear();
            return 1;
        }
    }
    return 0;
}

/* One column's arguments; 0, 1 (not plain: see str_texts) or -1 (an error set). */
static int column_get(PyObject *item, Column *col, Py_ssize_t n) {
    PyObject *key, *values, *sizes;
    if (!PyArg_ParseTuple(item, "OiOO", &key, &col->kind, &values, &sizes)) return -1;
    if (PyObject_GetBuffer(key, &col->key, PyBUF_SIMPLE) < 0) return -1;
    if (col->key.len <= 4096) { /* (a longer key's prefixes are written each time) */
        col->pre_room = col->key.len + 64; /* five heads of at most eleven bytes, and the key */
        col->pre = PyMem_Malloc((size_t)(PREFIX_SIZES * col->pre_room));
        col->pre_len = PyMem_Calloc(PREFIX_SIZES, sizeof(*col->pre_len));
        if (col->pre == NULL || col->pre_len == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (col->kind == 3) return str_texts(col, values, n);
    if (PyObject_GetBuffer(values, &col->values, PyBUF_SIMPLE) < 0) return -1;
    Py_ssize_t want = col->kind == 0 ? n * 8 : col->kind == 1 ? n * 4 : -1;
    if (col->kind < 0 || col->kind > 2 || (want >= 0 && col->values.len != want)) {
        PyErr_SetString(PyExc_ValueError, "a column's kind or values do not fit n rows");
        return -1;
    }
    return col->kind == 2 ? joined_texts(col, sizes, n) : 0;
}

/* The size of row i's value: its varint's, a float's, its text's. */
static inline Py_ssize_t value_size(const Column *col, Py_ssize_t i) {
    if (col->kind == 0) return varint_len((uint64_t)((const int64_t *)col->values.buf)[i]);
    return col->kind == 1 ? 4 : col->size[i];
}

/* The map entry's bytes before a value of sz bytes: the entry's head, the key, the Feature's
 * head, its list's (Int64List, FloatList, BytesList) and the packed values' or the value's. */
static unsigned char *put_prefix(unsigned char *p, const Column *col, Py_ssize_t sz) {
    Py_ssize_t f = field_len(field_len(sz));
    p = put_head(p, 0x0A, field_len(col->key.len) + field_len(f));
    p = put_head(p, 0x0A, col->key.len);
    memcpy(p, col->key.buf, (size_t)col->key.len);
    p += col->key.len;
    p = put_head(p, 0x12, f);
    p = put_head(p, col->kind == 0 ? 0x1A : col->kind == 1 ? 0x12 : 0x0A, field_len(sz));
    return put_head(p, 0x0A, sz);
}

/* The prefix of a value of sz bytes made ready (NULL when it is not kept: write it). */
static inline const unsigned char *prefix(Column *col, Py_ssize_t sz, Py_ssize_t *len) {
    if (col->pre == NULL || sz >= PREFIX_SIZES) return NULL;
    unsigned char *at = col->pre + sz * col->pre_room;
    if (col->pre_len[sz] == 0) col->pre_len[sz] = put_prefix(at, col, sz) - at;
    *len = col->pre_len[sz];
    return at;
}

static Py_ssize_t entry_len(Column *col, Py_ssize_t sz) {
    Py_ssize_t len;
    if (prefix(col, sz, &len) != NULL) return len + sz;
    return field_len(field_len(col->key.len) + field_len(field_len(field_len(sz))));
}

static unsigned char *put_entry(unsigned char *p, Column *col, Py_ssize_t i) {
    Py_ssize_t sz = value_size(col, i), len;
    const unsigned char *pre = prefix(col, sz, &len);
    if (pre != NULL) {
        memcpy(p, pre, (size_t)len);
        p += len;
    } else {
        p = put_prefix(p, col, sz);
    }
    if (col->kind == 0) return put_varint(p, (uint64_t)((const int64_t *)col->values.buf)[i]);
    const char *from = col->kind == 1 ? (const char *)col->values.buf + 4 * i : col->text[i];
    memcpy(p, from, (size_t)sz);
    return p + sz;
}

static PyObject *encode_plain(PyObject *self, PyObject *args) {
    PyObject *seq, *result = NULL, *buf = NULL, *starts = NULL, *ends = NULL;
    Py_ssize_t *bodies = NULL; /* each record's entries' size */
    Py_ssize_t n;
    int framed;
    if (!PyArg_ParseTuple(args, "Onp", &seq, &n, &framed)) return NULL;
    if (n < 0 || n > PY_SSIZE_T_MAX / 8) { /* n * 8 (the int64 columns', starts' and ends' size) must not wrap */
        PyErr_SetString(PyExc_ValueError, "n must be a row count, 0 <= n < 2**60");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(seq, "columns must be a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    Column *cols = PyMem_Calloc((size_t)(k ? k : 1), sizeof(Column));
    if (cols == NULL) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t c = 0; c < k; c++) {
        int got = column_get(PySequence_Fast_GET_ITEM(fast, c), &cols[c], n);
        if (got < 0) goto done;
        if (got > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    /* Each entry's size is bounded by its buffers' (held in memory), but columns may share
     * buffers: the sums are checked, a wrapped one would size buf too small. */
    Py_ssize_t room = framed ? 16 : 0, total = 0, most = PY_SSIZE_T_MAX - 32;
    bodies = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*bodies));
    if (bodies == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t body = 0;
        for (Py_ssize_t c = 0; c < k; c++) {
            Py_ssize_t len = entry_len(&cols[c], value_size(&cols[c], i));
            if (len > most - body) goto too_big;
            body += len;
        }
        if (room + field_len(body) > most - total) goto too_big;
        total += room + field_len(body);
        bodies[i] = body;
    }
    buf = PyBytes_FromStringAndSize(NULL, total);
    starts = PyBytes_FromStringAndSize(NULL, n * 8);
    ends = PyBytes_FromStringAndSize(NULL, n * 8);
    if (buf == NULL || starts == NULL || ends == NULL) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(buf);
    int64_t *s = (int64_t *)PyBytes_AS_STRING(starts), *e = (int64_t *)PyBytes_AS_STRING(ends);
    const unsigned char *base = p;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t body = bodies[i];
        unsigned char *header = p;
        if (framed) p += 12;
        s[i] = p - base;
        p = put_head(p, 0x0A, body);
        for (Py_ssize_t c = 0; c < k; c++) p = put_entry(p, &cols[c], i);
        e[i] = p - base;
        if (framed) {
            frame_around(header, (size_t)(e[i] - s[i]));
            p += 4;
        }
    }
    result = PyTuple_Pack(3, buf, starts, ends);
    goto done;
too_big:
    PyErr_SetString(PyExc_OverflowError, "the records would not fit in memory");
done:
    Py_XDECREF(buf);
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyMem_Free(bodies);
    columns_release(cols, k);
    Py_DECREF(fast);
    return result;
}

/* texts_joined(values) -> (data, sizes), or None: the UTF-8 of a sequence of str back to back
 * and each one's size (native int64s), what a helper process makes the texts again from
 * (texts()) for less than pickling the str objects costs; None when a value is not exactly a
 * str or has no UTF-8 (a lone surrogate). */
static PyObject *texts_joined(PyObject *self, PyObject *arg) {
    PyObject *data = NULL, *sizes = NULL, *result = NULL;
    Column *col = PyMem_Calloc(1, sizeof(Column));
    if (col == NULL) return PyErr_NoMemory();
    Py_ssize_t n = PySequence_Size(arg), total = 0;
    if (n < 0) goto done;
    int got = str_texts(col, arg, n);
    if (got != 0) {
        if (got > 0) result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) total += col->size[i]; /* each a str in memory: no overflow */
    data = PyBytes_FromStringAndSize(NULL, total);
    sizes = PyBytes_FromStringAndSize(NULL, n * 8);
    if (data == NULL || sizes == NULL) goto done;
    char *p = PyBytes_AS_STRING(data);
    int64_t *sz = (int64_t *)PyBytes_AS_STRING(sizes);
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(p, col->text[i], (size_t)col->size[i]);
        p += col->size[i];
        sz[i] = (int64_t)col->size[i];
    }
    result = PyTuple_Pack(2, data, sizes);
done:
    Py_XDECREF(data);
    Py_XDECREF(sizes);
    columns_release(col, 1);
    return result;
}

/* ------------------------------------------------------------------ parse_example */

/* What a parse step says: go on, or stop because the layout is not the regular one (the
 * caller falls back), or stop on a Python error (memory). */
enum { OK = 0, IRREGULAR = 1, FAILED = -1 };

typedef struct {
    const unsigned char *p, *end;
} Cursor;

/* A varint of at most ten bytes; the tenth may hold only int64's top bit. */
static int read_varint(Cursor *c, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (c->p >= c->end) return IRREGULAR;
        unsigned char b = *c->p++;
        if (shift == 63 && b > 1) return IRREGULAR;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = v;
            return OK;
        }
    }
    return IRREGULAR;
}

/* A length-delimited field with this one-byte tag, its length varint at most ``most`` bytes: its
 * payload as a sub-cursor. A one-byte length (the usual) is read at once. */
static inline int read_field(Cursor *c, unsigned char tag, Cursor *payload, int most) {
    const unsigned char *p = c->p;
    if (c->end - p < 2 || *p != tag) return IRREGULAR;
    uint64_t n = p[1];
    p += 2;
    if (n >= 0x80) {
        Cursor len = {p - 1, c->end - (p - 1) > most ? p - 1 + most : c->end};
        if (read_varint(&len, &n) != OK) return IRREGULAR;
        p = len.p;
    }
    if (n > (uint64_t)(c->end - p)) return IRREGULAR;
    payload->p = p;
    payload->end = p + n;
    c->p = p + n;
    return OK;
}

static PyObject *kind_bytes, *kind_float, *kind_int64;

/* Append a new reference (NULL: its making failed) to list, giving the reference up. */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return FAILED;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc < 0 ? FAILED : OK;
}

static int bytes_values(Cursor body, PyObject *list) {
    while (body.p < body.end) {
        Cursor v;
        if (read_field(&body, 0x0A, &v, 10) != OK) return IRREGULAR;
        if (append_new(list, PyBytes_FromStringAndSize((const char *)v.p, v.end - v.p)) != OK) return FAILED;
    }
    return OK;
}

/* Packed values: one field 1 spanning the list (an empty list has none). */
static int packed(Cursor body, Cursor *values) {
    values->p = values->end = body.p;
    if (body.p == body.end) return OK;
    if (read_field(&body, 0x0A, values, 10) != OK || body.p != body.end) return IRREGULAR;
    return OK;
}

static int float_values(Cursor body, PyObject *list) {
    Cursor v;
    if (packed(body, &v) != OK || (v.end - v.p) % 4) return IRREGULAR;
    for (; v.p < v.end; v.p += 4) {
        uint32_t bits = (uint32_t)v.p[0] | (uint32_t)v.p[1] << 8 | (uint32_t)v.p[2] << 16 | (uint32_t)v.p[3] << 24;
        float f;
        memcpy(&f, &bits, 4);
        if (append_new(list, PyFloat_FromDouble((double)f)) != OK) return FAILED;
    }
    return OK;
}

static int int64_values(Cursor body, PyObject *list) {
    Cursor v;
    if (packed(body, &v) != OK) return IRREGULAR;
    while (v.p < v.end) {
        uint64_t u;
        if (read_varint(&v, &u) != OK) return IRREGULAR;
        if (append_new(list, PyLong_FromLongLong((long long)(int64_t)u)) != OK) return FAILED;
    }
    return OK;
}

/* One Feature: (kind, values) in *out, or *out = NULL for a Feature with no list set. */
static int feature(Cursor f, PyObject **out) {
    *out = NULL;
    if (f.p == f.end) return OK;
    unsigned char tag = *f.p;
    Cursor body;
    if (read_field(&f, tag, &body, 10) != OK || f.p != f.end) return IRREGULAR;
    PyObject *kind = tag == 0x0A ? kind_bytes : tag == 0x12 ? kind_float : tag == 0x1A ? kind_int64 : NULL;
    if (kind == NULL) return IRREGULAR;
    PyObject *list = PyList_New(0);
    if (list == NULL) return FAILED;
    int rc = tag == 0x0A ? bytes_values(body, list) : tag == 0x12 ? float_values(body, list) : int64_values(body, list);
    if (rc == OK) {
        *out = PyTuple_Pack(2, kind, list);
        rc = *out == NULL ? FAILED : OK;
    }
    Py_DECREF(list);
    return rc;
}

/* One map entry ``key = 1, value = 2``, exactly these two in this order. */
static int entry(Cursor e, PyObject *dict, PyObject *seen) {
    Cursor key, value;
    if (read_field(&e, 0x0A, &key, 10) != OK || read_field(&e, 0x12, &value, 10) != OK || e.p != e.end)
        return IRREGULAR;
    PyObject *name = PyUnicode_DecodeUTF8((const char *)key.p, key.end - key.p, NULL);
    if (name == NULL) {
        PyErr_Clear(); /* not UTF-8: protobuf's own parse says so */
        return IRREGULAR;
    }
    int dup = PySet_Contains(seen, name);
    int rc = dup != 0 ? (dup < 0 ? FAILED : IRREGULAR) : PySet_Add(seen, name) < 0 ? FAILED : OK;
    PyObject *kinded = NULL;
    if (rc == OK) rc = feature(value, &kinded);
    if (rc == OK && kinded != NULL && PyDict_SetItem(dict, name, kinded) < 0) rc = FAILED;
    Py_XDECREF(kinded);
    Py_DECREF(name);
    return rc;
}

static int example(Cursor c, PyObject *dict, PyObject *seen) {
    while (c.p < c.end) {
        Cursor features;
        if (read_field(&c, 0x0A, &features, 10) != OK) return IRREGULAR;
        while (features.p < features.end) {
            Cursor e;
            if (read_field(&features, 0x0A, &e, 10) != OK) return IRREGULAR;
            int rc = entry(e, dict, seen);
            if (rc != OK) return rc;
        }
    }
    return OK;
}

static PyObject *parse_example(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (!PyBytes_Check(arg)) Py_RETURN_NONE; /* what protobuf makes of other objects is its own call */
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *dict = PyDict_New(), *seen = PySet_New(NULL);
    int rc = dict == NULL || seen == NULL ? FAILED : OK;
    if (rc == OK) {
        Cursor c = {(const unsigned char *)data.buf, (const unsigned char *)data.buf + data.len};
        rc = example(c, dict, seen);
    }
    PyBuffer_Release(&data);
    Py_XDECREF(seen);
    if (rc == OK) return dict;
    Py_XDECREF(dict);
    if (rc == FAILED) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ scalar_columns */

/* scalar_columns(buf, starts, ends, keys, kinds) -> (slow, found, values)
 * One pass over the Examples buf[starts[i]:ends[i]] for their int64 and float32 scalars, as
 * serializers write them: exactly one ``features`` field spanning the record; map entries of
 * exactly ``key = 1, value = 2``; every key one of keys (a tuple of bytes), none twice; length
 * varints of at most five bytes. kinds (bytes, one a key): 0 a feature not extracted (its
 * Feature not looked at), 1 an int64 scalar (a packed Int64List of one varint), 2 a float32
 * scalar (a packed FloatList of one value), 3 a bytes scalar (a BytesList of one value). Any
 * other record is slow (n bytes, 1 each: the caller's general parse judges it, values and
 * errors). For the W extracted keys, in keys' order: found, n bytes each (1 where the record
 * had it), and values, a list of W bytearrays of n int64s (an int64 each, or a float32's bits
 * in the low half; 0 where not found), or for a bytes key 2n int64s: each value's start and
 * end in buf (where the caller slices it, unchecked UTF-8 for a text). */

typedef struct {
    const unsigned char **key;
    Py_ssize_t *len;
    uint64_t *word; /* a key's first eight bytes, little-endian, zeros after its end */
    Py_ssize_t k;
    int32_t *slots; /* open addressing over key_hash, -1 empty */
    size_t mask;
    const unsigned char *bufend; /* eight-byte reads of a key stop here */
} Keys;

static size_t key_hash(const unsigned char *p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull ^ n;
    while (n--) h = (h ^ *p++) * 0x100000001B3ull;
    return (size_t)(h ^ (h >> 29));
}

static int32_t key_find(const Keys *t, const unsigned char *p, Py_ssize_t n) {
    for (size_t h = key_hash(p, (size_t)n) & t->mask;; h = (h + 1) & t->mask) {
        int32_t c = t->slots[h];
        if (c < 0 || (t->len[c] == n && memcmp(t->key[c], p, (size_t)n) == 0)) return c;
    }
}

/* Whether the n bytes at p are key c: one word compare when the key fits eight bytes. */
static inline int key_is(const Keys *t, int32_t c, const unsigned char *p, Py_ssize_t n) {
    if (t->len[c] != n) return 0;
    if (n > 8 || p + 8 > t->bufend) return memcmp(t->key[c], p, (size_t)n) == 0;
    uint64_t w = le64(p);
    if (n < 8) w &= ((uint64_t)1 << (8 * n)) - 1;
    return w == t->word[c];
}

/* The one value of a scalar Feature: ``1a L (0a L' varint)`` (int64) or ``12 06 0a 04 f32``. */
static int scalar_value(Cursor f, char kind, int64_t *out) {
    Cursor list, packed;
    if (read_field(&f, kind == 1 ? 0x1A : 0x12, &list, 5) != OK || f.p != f.end) return IRREGULAR;
    if (read_field(&list, 0x0A, &packed, 5) != OK || list.p != list.end) return IRREGULAR;
    if (kind == 2) {
        if (packed.end - packed.p != 4) return IRREGULAR;
        *out = (int64_t)le32(packed.p);
        return OK;
    }
    uint64_t v;
    if (read_varint(&packed, &v) != OK || packed.p != packed.end) return IRREGULAR; /* exactly one value */
    *out = (int64_t)v;
    return OK;
}

/* The one value of a bytes Feature, ``0a L (0a L' value)``: its start and end in base. */
static int bytes_value(Cursor f, const unsigned char *base, int64_t *out) {
    Cursor list, value;
    if (read_field(&f, 0x0A, &list, 5) != OK || f.p != f.end) return IRREGULAR;
    if (read_field(&list, 0x0A, &value, 5) != OK || list.p != list.end) return IRREGULAR;
    out[0] = value.p - base;
    out[1] = value.end - base;
    return OK;
}

/* One record's scalars into values (row i) and found; 0, or -1 when it is not regular. guess[j]:
 * the key of entry j in the last regular record, tried first. seen: per key, the last record
 * that had it (a key twice is irregular). */
static int record_scalars(const unsigned char *base, int64_t s, int64_t e, const Keys *t, const char *kinds,
                          const Py_ssize_t *slot, int32_t *guess, int64_t *seen, int64_t i, Py_ssize_t n, char *found,
                          int64_t **values) {
    Cursor c = {base + s, base + e}, body;
    if (read_field(&c, 0x0A, &body, 5) != OK || c.p != c.end) return -1;
    Py_ssize_t m = 0;
    while (body.p < body.end) {
        Cursor entry, key, value;
        if (m == t->k || read_field(&body, 0x0A, &entry, 5) != OK) return -1;
        if (read_field(&entry, 0x0A, &key, 5) != OK || read_field(&entry, 0x12, &value, 5) != OK || entry.p != entry.end)
            return -1;
        Py_ssize_t klen = key.end - key.p;
        int32_t col = guess[m];
        if (col < 0 || !key_is(t, col, key.p, klen)) {
            col = key_find(t, key.p, klen);
            if (col < 0) return -1;
            guess[m] = col;
        }
        if (seen[col] == i) return -1;
        seen[col] = i;
        if (kinds[col] == 3) {
            if (bytes_value(value, base, &values[slot[col]][2 * i]) != OK) return -1;
            found[slot[col] * n + i] = 1;
        } else if (kinds[col]) {
            if (scalar_value(value, kinds[col], &values[slot[col]][i]) != OK) return -1;
            found[slot[col] * n + i] = 1;
        }
        m++;
    }
    return 0;
}

static void keys_release(Keys *t) {
    PyMem_Free(t->key);
    PyMem_Free(t->len);
    PyMem_Free(t->word);
    PyMem_Free(t->slots);
}

static int keys_get(PyObject *tuple, Keys *t) {
    memset(t, 0, sizeof(*t));
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) == 0 || PyTuple_GET_SIZE(tuple) > (1 << 24)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a non-empty tuple of bytes");
        return -1;
    }
    t->k = PyTuple_GET_SIZE(tuple);
    size_t size = 4;
    while (size < 2 * (size_t)t->k) size *= 2;
    t->mask = size - 1;
    t->key = PyMem_Calloc((size_t)t->k, sizeof(*t->key));
    t->len = PyMem_Calloc((size_t)t->k, sizeof(*t->len));
    t->word = PyMem_Calloc((size_t)t->k, sizeof(*t->word));
    t->slots = PyMem_Malloc(size * sizeof(*t->slots));
    if (t->key == NULL || t->len == NULL || t->word == NULL || t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(t->slots, 0xFF, size * sizeof(*t->slots));
    for (Py_ssize_t c = 0; c < t->k; c++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, c);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "keys must be a non-empty tuple of bytes");
            return -1;
        }
        t->key[c] = (const unsigned char *)PyBytes_AS_STRING(item);
        t->len[c] = PyBytes_GET_SIZE(item);
        for (Py_ssize_t b = 0; b < t->len[c] && b < 8; b++) t->word[c] |= (uint64_t)t->key[c][b] << (8 * b);
        if (key_find(t, t->key[c], t->len[c]) >= 0) {
            PyErr_SetString(PyExc_ValueError, "keys must be distinct");
            return -1;
        }
        size_t h = key_hash(t->key[c], (size_t)t->len[c]) & t->mask;
        while (t->slots[h] >= 0) h = (h + 1) & t->mask;
        t->slots[h] = (int32_t)c;
    }
    return 0;
}

static PyObject *scalar_columns(PyObject *self, PyObject *args) {
    PyObject *data, *starts, *ends, *keys_arg, *slow = NULL, *found = NULL, *values = NULL, *result = NULL;
    Py_buffer kinds = {0};
    Ranges r;
    Keys t;
    if (!PyArg_ParseTuple(args, "OOOOy*", &data, &starts, &ends, &keys_arg, &kinds)) return NULL;
    if (ranges_of(data, starts, ends, &r) < 0) {
        PyBuffer_Release(&kinds);
        return NULL;
    }
    int32_t *guess = NULL;
    int64_t *seen = NULL, **vals = NULL;
    Py_ssize_t *slot = NULL, w = 0;
    const char *kind = kinds.buf;
    if (keys_get(keys_arg, &t) < 0) goto done;
    if (kinds.len != t.k) {
        PyErr_SetString(PyExc_ValueError, "kinds must have one byte a key");
        goto done;
    }
    slot = PyMem_Malloc((size_t)t.k * sizeof(*slot));
    guess = PyMem_Malloc((size_t)t.k * sizeof(*guess));
    seen = PyMem_Malloc((size_t)t.k * sizeof(*seen));
    vals = PyMem_Calloc((size_t)t.k, sizeof(*vals));
    if (slot == NULL || guess == NULL || seen == NULL || vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t c = 0; c < t.k; c++) {
        if (kind[c] < 0 || kind[c] > 3) {
            PyErr_SetString(PyExc_ValueError, "a kind must be 0, 1, 2 or 3");
            goto done;
        }
        slot[c] = kind[c] ? w++ : -1;
    }
    if (w && r.n > PY_SSIZE_T_MAX / 16 / w) {
        PyErr_NoMemory();
        goto done;
    }
    slow = PyBytes_FromStringAndSize(NULL, r.n);
    found = PyBytes_FromStringAndSize(NULL, r.n * w);
    values = PyList_New(w);
    if (slow == NULL || found == NULL || values == NULL) goto done;
    for (Py_ssize_t c = 0, x = 0; c < t.k; c++) {
        if (!kind[c]) continue;
        Py_ssize_t size = r.n * (kind[c] == 3 ? 16 : 8); /* a bytes value's start and end */
        PyObject *column = PyByteArray_FromStringAndSize(NULL, size);
        if (column == NULL) goto done;
        PyList_SET_ITEM(values, x, column);
        vals[x] = (int64_t *)PyByteArray_AS_STRING(column);
        memset(vals[x], 0, (size_t)size);
        x++;
    }
    t.bufend = (const unsigned char *)r.data.buf + r.data.len;
    char *is_slow = PyBytes_AS_STRING(slow), *has = PyBytes_AS_STRING(found);
    const int64_t *s = r.starts.buf, *e = r.ends.buf; /* checked by ranges_of; the GIL is held */
    memset(guess, 0xFF, (size_t)t.k * sizeof(*guess));
    memset(seen, 0xFF, (size_t)t.k * sizeof(*seen));
    memset(has, 0, (size_t)(r.n * w));
    for (Py_ssize_t i = 0; i < r.n; i++) {
        is_slow[i] = record_scalars(r.data.buf, s[i], e[i], &t, kind, slot, guess, seen, i, r.n, has, vals) < 0;
        if (is_slow[i])
            for (Py_ssize_t x = 0; x < w; x++) has[x * r.n + i] = 0; /* a slow record's values: none */
    }
    result = PyTuple_Pack(3, slow, found, values);
done:
    Py_XDECREF(slow);
    Py_XDECREF(found);
    Py_XDECREF(values);
    PyMem_Free(slot);
    PyMem_Free(guess);
    PyMem_Free(seen);
    PyMem_Free(vals);
    keys_release(&t);
    ranges_release(&r);
    PyBuffer_Release(&kinds);
    return result;
}

/* ------------------------------------------------------------------ float32 figures */

#define FIG_BLOCK 4096

/* One block of m (> 0) float32 values: zeros, minimum, maximum, and the sum and the sum of
 * squares of each value's difference from the block's first, in double (exact differences:
 * no catastrophic cancellation however large the mean). Whether a NaN or an infinity was
 * among them. With GCC or Clang, four values at a time in vector registers (the compilers do
 * not vectorise the plain loop: it mixes float and double lanes); elsewhere one at a time. */
#if defined(__GNUC__)
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
#endif

static int figures_block(const float *x, Py_ssize_t m, Py_ssize_t *zeros, float *lo, float *hi, double *s1, double *s2) {
    const double k = x[0];
    double sa = 0.0, sq = 0.0;
    int32_t bad = 0;
    Py_ssize_t i = 0, z = 0;
    float mn = x[0], mx = x[0];
#if defined(__GNUC__)
    v4f vmn = {x[0], x[0], x[0], x[0]}, vmx = vmn, zero = {0.0f, 0.0f, 0.0f, 0.0f};
    v4i vz = {0, 0, 0, 0}, vbad = vz;
    v2d kk = {k, k}, a0 = {0.0, 0.0}, a1 = a0, q0 = a0, q1 = a0;
    for (; i + 4 <= m; i += 4) {
        v4f f;
        memcpy(&f, x + i, sizeof(f));
        vz += f == zero; /* -1 a lane that is zero */
        vbad |= (f - f) != zero; /* NaN - NaN and inf - inf are NaN, so unequal to zero */
        v4i lt = f < vmn, gt = f > vmx;
        vmn = (v4f)(((v4i)f & lt) | ((v4i)vmn & ~lt));
        vmx = (v4f)(((v4i)f & gt) | ((v4i)vmx & ~gt));
        v2d d0 = {(double)f[0], (double)f[1]}, d1 = {(double)f[2], (double)f[3]};
        d0 -= kk;
        d1 -= kk;
        a0 += d0;
        a1 += d1;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    for (int j = 0; j < 4; j++) {
        z -= vz[j];
        bad |= vbad[j];
        mn = vmn[j] < mn ? vmn[j] : mn;
        mx = vmx[j] > mx ? vmx[j] : mx;
    }
    sa = (a0[0] + a0[1]) + (a1[0] + a1[1]);
    sq = (q0[0] + q0[1]) + (q1[0] + q1[1]);
#endif
    for (; i < m; i++) {
        float f = x[i];
        double d = (double)f - k;
        z += f == 0.0f;
        bad |= f - f != 0.0f;
        mn = f < mn ? f : mn;
        mx = f > mx ? f : mx;
        sa += d;
        sq += d * d;
    }
    *zeros += z;
    *lo = mn < *lo ? mn : *lo;
    *hi = mx > *hi ? mx : *hi;
    *s1 = sa;
    *s2 = sq;
    return bad != 0;
}

/* float32_figures(buf) -> (zeros, min, max, mean, m2) | None: of every float32 in buf (native
 * order, at least one). Each block's mean is kept as its offset from the first value (exact
 * differences of nearby values: no rounding at the mean's magnitude), and the squared
 * deviations are the blocks' own plus each block's offset from the overall one, squared and
 * weighed: the exact decomposition, with no running mean to drift (a step of one ulp at 1e4
 * keeps 1e-15 of its m2, not 1e-9). None when one is a NaN or an infinity (the caller counts
 * those its own way). The GIL is let go: statistics' threads call it beside the writer. */
static PyObject *float32_figures(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(float);
    if (n == 0 || view.len % (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "float32_figures takes a whole number of float32s, at least one");
        return NULL;
    }
    Py_ssize_t blocks = (n + FIG_BLOCK - 1) / FIG_BLOCK;
    double *offset = PyMem_RawMalloc((size_t)blocks * 2 * sizeof(double));
    if (offset == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    double *own = offset + blocks; /* each block's squared deviations from its own mean */
    const float *v = view.buf;
    const double first = v[0];
    Py_ssize_t zeros = 0;
    float lo = v[0], hi = v[0];
    double weighed = 0.0, mean = 0.0, m2 = 0.0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < blocks && !bad; i++) {
        Py_ssize_t b = i * FIG_BLOCK, m = n - b < FIG_BLOCK ? n - b : FIG_BLOCK;
        double s1, s2;
        bad = figures_block(v + b, m, &zeros, &lo, &hi, &s1, &s2);
        offset[i] = ((double)v[b] - first) + s1 / (double)m;
        own[i] = s2 - s1 * (s1 / (double)m);
        if (own[i] < 0.0) own[i] = 0.0;
        weighed += offset[i] * (double)m;
    }
    if (!bad) {
        double overall = weighed / (double)n;
        for (Py_ssize_t i = 0; i < blocks; i++) {
            Py_ssize_t m = n - i * FIG_BLOCK < FIG_BLOCK ? n - i * FIG_BLOCK : FIG_BLOCK;
            double d = offset[i] - overall;
            m2 += own[i] + d * d * (double)m;
        }
        mean = first + overall;
    }
    Py_END_ALLOW_THREADS;
    PyMem_RawFree(offset);
    PyBuffer_Release(&view);
    if (bad) Py_RETURN_NONE;
    return Py_BuildValue("(ndddd)", zeros, (double)lo, (double)hi, mean, m2);
}

/* ------------------------------------------------------------------ multilinear digests */

/* digest_sums(values, coefficients) -> bytes | None: for each bytes value, the sum of
 * coefficients[k] * word[k] modulo 2**64 over its little-endian 32-bit words (the last one
 * zero-padded), as native-order uint64s: catalog.stats.digest's sums, one loop a value instead
 * of NumPy's widened copies. None when a value is not bytes or is longer than the coefficients
 * cover (the caller's NumPy path then decides). */
static PyObject *digest_sums(PyObject *self, PyObject *args) {
    PyObject *values, *seq, *out = NULL;
    Py_buffer coef;
    if (!PyArg_ParseTuple(args, "Oy*", &values, &coef)) return NULL;
    seq = PySequence_Fast(values, "values must be a sequence of bytes");
    if (seq == NULL) {
        PyBuffer_Release(&coef);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), words = coef.len / 8;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyBytes_CheckExact(items[i]) || (PyBytes_GET_SIZE(items[i]) + 3) / 4 > words) {
            out = Py_None;
            Py_INCREF(out);
            goto done;
        }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL) goto done;
    const unsigned char *cb = coef.buf;
    uint64_t *sums = (uint64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) { /* (the values are immutable bytes: their buffers stay put) */
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(items[i]);
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]), whole = len / 4;
        uint64_t s = 0;
        for (Py_ssize_t k = 0; k < whole; k++, p += 4) {
            uint64_t a;
            memcpy(&a, cb + 8 * k, 8);
            uint32_t x = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            s += a * x;
        }
        if (len % 4) {
            uint32_t x = 0;
            for (Py_ssize_t b = 0; b < len % 4; b++) x |= (uint32_t)p[b] << (8 * b);
            uint64_t a;
            memcpy(&a, cb + 8 * whole, 8);
            s += a * x;
        }
        sums[i] = s;
    }
done:
    Py_DECREF(seq);
    PyBuffer_Release(&coef);
    return out;
}

/* ------------------------------------------------------------------ module */

static PyObject *hardware_crc(PyObject *self, PyObject *unused) { return PyBool_FromLong(crc_fn != crc_soft); }

static PyMethodDef methods[] = {
    {"crc32c_ranges", crc32c_ranges, METH_VARARGS, "CRC32C of each buf[starts[i]:ends[i]], as native-order uint32s."},
    {"crc32c", crc32c_one, METH_VARARGS, "CRC32C of a buffer, continuing from crc (default 0)."},
    {"header_fault", header_fault, METH_VARARGS, "The first record whose TFRecord header is wrong, or -1."},
    {"join_ranges", join_ranges, METH_VARARGS, "The ranges buf[starts[i]:ends[i]] joined in one bytes."},
    {"slices", slices, METH_VARARGS, "Each buf[starts[i]:ends[i]] as bytes, in a list."},
    {"texts", texts, METH_VARARGS, "Each buf[starts[i]:ends[i]] decoded as UTF-8, in a list; None if one is not."},
    {"encode_plain", encode_plain, METH_VARARGS, "Examples of plain scalar columns, optionally framed."},
    {"frame_records", frame_records, METH_O, "Records framed as TFRecord back to back, and their lengths."},
    {"texts_joined", texts_joined, METH_O, "The UTF-8 of a sequence of str back to back, and each one's size."},
    {"parse_example", parse_example, METH_O, "A regular tf.train.Example as {name: (kind, values)}, else None."},
    {"scan_records", scan_records, METH_VARARGS, "Every whole TFRecord record in buf from pos, checked."},
    {"walk_records", walk_records, METH_VARARGS, "Header offsets and data lengths of the whole records in buf[:end]."},
    {"pread_ranges", pread_ranges, METH_VARARGS, "Ranges of open files read into one bytes, then pad zero bytes."},
    {"scalar_columns", scalar_columns, METH_VARARGS, "The int64 and float32 scalars of regular Examples, in one pass."},
    {"float32_figures", float32_figures, METH_O, "Zeros, min, max, mean and m2 of finite float32s; None if one is not."},
    {"digest_sums", digest_sums, METH_VARARGS, "Multilinear sums of bytes values' 32-bit words; None if one is not bytes."},
    {"hardware_crc", hardware_crc, METH_NOARGS, "Whether CRC32C runs on the CPU's own instruction."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "catalog.tfrecord._native", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) crc_fn = crc_hw;
#endif
    kind_bytes = PyUnicode_InternFromString("bytes_list");
    kind_float = PyUnicode_InternFromString("float_list");
    kind_int64 = PyUnicode_InternFromString("int64_list");
    if (!kind_bytes || !kind_float || !kind_int64) return NULL;
    return PyModule_Create(&module);
}
