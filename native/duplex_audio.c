/*
 * hub_runtime._native: the audio hot path in C.
 *
 * Every function has a pure numpy twin in hub_runtime/audio/twin.py with the same
 * arithmetic (tests/hub_runtime/test_native.py runs both and compares them); set
 * DUPLEX_HUB_PURE=1 to use the twins. Nothing here allocates per frame: callers pass
 * buffers (anything with the buffer protocol: numpy arrays, bytearrays).
 *
 *   frame_rms(int16[])                     -> float   root mean square, in int16 units
 *   int16_to_float(int16[] src, float32[] dst)          x / 32768
 *   float_to_int16(float32[] src, int16[] dst)          round, clip to int16
 *   Resampler(src_rate, dst_rate)          streaming windowed-sinc resampler
 *       .process(int16[] src, int16[] dst) -> int       samples written (dst >= max_out(n))
 *       .max_out(n)                        -> int
 *   RingBuffer(capacity)                   single producer, single consumer, int16 samples
 *       .write(int16[]) -> int             samples written (the rest does not fit: dropped)
 *       .read_into(int16[]) -> int         samples read (up to len)
 *       .available() -> int
 *
 * The ring's indices are C11 atomics (release on publish, acquire on read): the device
 * thread writes while the event loop reads, without a lock. (Under CPython the GIL is held
 * by both callers anyway; the atomics keep it correct without it, e.g. free-threaded.)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "buffer.h"

/* the resampler's filter: taps per side at the output's band edge, Kaiser-like window */
#define HALF_TAPS 16

static PyObject *frame_rms(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (get_buffer(arg, &b, "h", 0, "frame") < 0) return NULL;
    const int16_t *x = (const int16_t *)b.buf;
    Py_ssize_t n = b.len / 2;
    double acc = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) acc += (double)x[i] * (double)x[i];
    PyBuffer_Release(&b);
    return PyFloat_FromDouble(n ? sqrt(acc / (double)n) : 0.0);
}

static PyObject *int16_to_float(PyObject *self, PyObject *args) {
    PyObject *src_o, *dst_o;
    Py_buffer s, d;
    if (!PyArg_ParseTuple(args, "OO", &src_o, &dst_o)) return NULL;
    if (get_buffer(src_o, &s, "h", 0, "src") < 0) return NULL;
    if (get_buffer(dst_o, &d, "f", 1, "dst") < 0) { PyBuffer_Release(&s); return NULL; }
    Py_ssize_t n = s.len / 2;
    if (d.len / 4 < n) {
        PyErr_SetString(PyExc_ValueError, "dst is shorter than src");
    } else {
        const int16_t *x = (const int16_t *)s.buf;
        float *y = (float *)d.buf;
        for (Py_ssize_t i = 0; i < n; i++) y[i] = (float)x[i] / 32768.0f;
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static inline int16_t clip16(double v) {
    v = nearbyint(v);  /* round half to even, as numpy's round */
    if (v > 32767.0) return 32767;
    if (v < -32768.0) return -32768;
    return (int16_t)v;
}

static PyObject *float_to_int16(PyObject *self, PyObject *args) {
    PyObject *src_o, *dst_o;
    Py_buffer s, d;
    if (!PyArg_ParseTuple(args, "OO", &src_o, &dst_o)) return NULL;
    if (get_buffer(src_o, &s, "f", 0, "src") < 0) return NULL;
    if (get_buffer(dst_o, &d, "h", 1, "dst") < 0) { PyBuffer_Release(&s); return NULL; }
    Py_ssize_t n = s.len / 4;
    if (d.len / 2 < n) {
        PyErr_SetString(PyExc_ValueError, "dst is shorter than src");
    } else {
        const float *x = (const float *)s.buf;
        int16_t *y = (int16_t *)d.buf;
        for (Py_ssize_t i = 0; i < n; i++) y[i] = clip16((double)x[i] * 32768.0);
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* -- Resampler ----------------------------------------------------------------------------- */
/* Output sample k sits at input position t = k * src / dst = base + p / dst (p the phase,
 * (k * src) mod dst). Its value is sum_i x[base - R + i] * table[p][i], i = 0 .. 2R+1, with
 * table[p][i] = h(p / dst - (i - R)) and h(x) = c sinc(c x) w(c x / HALF_TAPS) for
 * |x| < HALF_TAPS / c, else 0; c = min(1, dst / src) (the cut-off at the lower Nyquist),
 * w a Hann window, R = ceil(HALF_TAPS / c). The table is made once (dst / gcd phases), so
 * a sample costs 2R+2 multiply-adds. History keeps the input the next outputs need, so a
 * stream gives the same output as one call. */
typedef struct {
    PyObject_HEAD
    long long src, dst, phases;  /* dst reduced by gcd: the number of distinct phases */
    long long step;              /* src reduced by gcd */
    Py_ssize_t r, taps;          /* R; 2R + 2 */
    double *table;               /* phases x taps */
    long long consumed;          /* input samples before history[0] */
    long long produced;          /* output samples so far */
    double *hist;
    Py_ssize_t hist_len, hist_cap;
} Resampler;

static double kernel(double x, double c) {
    double reach = HALF_TAPS / c;
    if (fabs(x) >= reach) return 0.0;
    double u = x * c;
    double s = fabs(u) < 1e-12 ? 1.0 : sin(M_PI * u) / (M_PI * u);
    double w = 0.5 + 0.5 * cos(M_PI * u / HALF_TAPS);
    return c * s * w;
}

static long long gcd(long long a, long long b) {
    while (b) { long long t = a % b; a = b; b = t; }
    return a;
}

static int Resampler_init(Resampler *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"src_rate", "dst_rate", NULL};
    long src, dst;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ll", names, &src, &dst)) return -1;
    if (src <= 0 || dst <= 0) {
        PyErr_SetString(PyExc_ValueError, "rates must be positive");
        return -1;
    }
    long long g = gcd(src, dst);
    self->src = src;
    self->dst = dst;
    self->phases = dst / g;
    self->step = src / g;
    double c = dst < src ? (double)dst / (double)src : 1.0;
    self->r = (Py_ssize_t)ceil(HALF_TAPS / c);
    self->taps = 2 * self->r + 2;
    PyMem_Free(self->table);
    self->table = PyMem_Malloc((size_t)(self->phases * self->taps) * sizeof(double));
    if (!self->table) { PyErr_NoMemory(); return -1; }
    for (long long p = 0; p < self->phases; p++)
        for (Py_ssize_t i = 0; i < self->taps; i++)
            self->table[p * self->taps + i] = kernel((double)p / (double)self->phases - (double)(i - self->r), c);
    self->consumed = self->produced = 0;
    self->hist_len = self->hist_cap = 0;
    PyMem_Free(self->hist);
    self->hist = NULL;
    return 0;
}

static void Resampler_dealloc(Resampler *self) {
    PyMem_Free(self->hist);
    PyMem_Free(self->table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t max_out(Resampler *self, Py_ssize_t n) {
    long long avail = self->consumed + self->hist_len + n;
    return (Py_ssize_t)((avail * self->phases) / self->step - self->produced + 2);
}

static PyObject *Resampler_max_out(Resampler *self, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0 && PyErr_Occurred()) return NULL;
    return PyLong_FromSsize_t(max_out(self, n));
}

static PyObject *Resampler_process(Resampler *self, PyObject *args) {
    PyObject *src_o, *dst_o;
    Py_buffer s, d;
    if (!PyArg_ParseTuple(args, "OO", &src_o, &dst_o)) return NULL;
    if (get_buffer(src_o, &s, "h", 0, "src") < 0) return NULL;
    if (get_buffer(dst_o, &d, "h", 1, "dst") < 0) { PyBuffer_Release(&s); return NULL; }
    Py_ssize_t n = s.len / 2, room = d.len / 2, written = 0;
    if (room < max_out(self, n)) {
        PyErr_SetString(PyExc_ValueError, "dst is shorter than max_out(len(src))");
        goto done;
    }
    if (self->hist_len + n > self->hist_cap) {  /* grows to the largest chunk once, then stays */
        Py_ssize_t cap = (self->hist_len + n) * 2;
        double *h = PyMem_Realloc(self->hist, (size_t)cap * sizeof(double));
        if (!h) { PyErr_NoMemory(); goto done; }
        self->hist = h;
        self->hist_cap = cap;
    }
    const int16_t *x = (const int16_t *)s.buf;
    for (Py_ssize_t i = 0; i < n; i++) self->hist[self->hist_len + i] = (double)x[i];
    self->hist_len += n;
    int16_t *y = (int16_t *)d.buf;
    long long end = self->consumed + self->hist_len;  /* absolute index past the last input */
    for (;;) {
        long long pos = self->produced * self->step;
        long long base = pos / self->phases, p = pos % self->phases;
        if (base + self->r + 1 >= end) break;  /* needs input not yet seen */
        const double *k = self->table + p * self->taps;
        double acc = 0.0;
        for (Py_ssize_t i = 0; i < self->taps; i++) {
            long long j = base - self->r + i;
            if (j >= 0) acc += self->hist[j - self->consumed] * k[i];  /* before the stream: zeros */
        }
        y[written++] = clip16(acc);
        self->produced++;
    }
    /* keep what the next output still needs */
    long long keep_from = (self->produced * self->step) / self->phases - self->r;
    if (keep_from < self->consumed) keep_from = self->consumed;
    Py_ssize_t drop = (Py_ssize_t)(keep_from - self->consumed);
    if (drop > 0) {
        memmove(self->hist, self->hist + drop, (size_t)(self->hist_len - drop) * sizeof(double));
        self->hist_len -= drop;
        self->consumed += drop;
    }
done:
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromSsize_t(written);
}

static PyMethodDef Resampler_methods[] = {
    {"process", (PyCFunction)Resampler_process, METH_VARARGS, "process(src, dst) -> samples written"},
    {"max_out", (PyCFunction)Resampler_max_out, METH_O, "max_out(n) -> room dst needs for n more samples"},
    {NULL}};

static PyTypeObject ResamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hub_runtime._native.Resampler",
    .tp_basicsize = sizeof(Resampler),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Streaming windowed-sinc resampler of int16 audio",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Resampler_init,
    .tp_dealloc = (destructor)Resampler_dealloc,
    .tp_methods = Resampler_methods,
};

/* -- RingBuffer ------------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    int16_t *data;
    Py_ssize_t cap;               /* a power of two */
    _Atomic long long head;       /* written (producer) */
    _Atomic long long tail;       /* read (consumer) */
} RingBuffer;

static int RingBuffer_init(RingBuffer *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"capacity", NULL};
    Py_ssize_t want;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n", names, &want)) return -1;
    if (want <= 0) { PyErr_SetString(PyExc_ValueError, "capacity must be positive"); return -1; }
    Py_ssize_t cap = 1;
    while (cap < want) cap <<= 1;
    PyMem_Free(self->data);
    self->data = PyMem_Calloc((size_t)cap, sizeof(int16_t));
    if (!self->data) { PyErr_NoMemory(); return -1; }
    self->cap = cap;
    atomic_store(&self->head, 0);
    atomic_store(&self->tail, 0);
    return 0;
}

static void RingBuffer_dealloc(RingBuffer *self) {
    PyMem_Free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *RingBuffer_write(RingBuffer *self, PyObject *arg) {
    Py_buffer b;
    if (get_buffer(arg, &b, "h", 0, "samples") < 0) return NULL;
    long long head = atomic_load_explicit(&self->head, memory_order_relaxed);
    long long tail = atomic_load_explicit(&self->tail, memory_order_acquire);
    Py_ssize_t free_ = self->cap - (Py_ssize_t)(head - tail), n = b.len / 2;
    if (n > free_) n = free_;
    const int16_t *x = (const int16_t *)b.buf;
    for (Py_ssize_t i = 0; i < n; i++) self->data[(head + i) & (self->cap - 1)] = x[i];
    atomic_store_explicit(&self->head, head + n, memory_order_release);
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(n);
}

static PyObject *RingBuffer_read_into(RingBuffer *self, PyObject *arg) {
    Py_buffer b;
    if (get_buffer(arg, &b, "h", 1, "out") < 0) return NULL;
    long long tail = atomic_load_explicit(&self->tail, memory_order_relaxed);
    long long head = atomic_load_explicit(&self->head, memory_order_acquire);
    Py_ssize_t n = (Py_ssize_t)(head - tail), room = b.len / 2;
    if (n > room) n = room;
    int16_t *y = (int16_t *)b.buf;
    for (Py_ssize_t i = 0; i < n; i++) y[i] = self->data[(tail + i) & (self->cap - 1)];
    atomic_store_explicit(&self->tail, tail + n, memory_order_release);
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(n);
}

static PyObject *RingBuffer_available(RingBuffer *self, PyObject *unused) {
    long long head = atomic_load_explicit(&self->head, memory_order_acquire);
    long long tail = atomic_load_explicit(&self->tail, memory_order_acquire);
    return PyLong_FromLongLong(head - tail);
}

static PyObject *RingBuffer_capacity(RingBuffer *self, void *unused) { return PyLong_FromSsize_t(self->cap); }

static PyMethodDef RingBuffer_methods[] = {
    {"write", (PyCFunction)RingBuffer_write, METH_O, "write(samples) -> samples written"},
    {"read_into", (PyCFunction)RingBuffer_read_into, METH_O, "read_into(out) -> samples read"},
    {"available", (PyCFunction)RingBuffer_available, METH_NOARGS, "samples waiting"},
    {NULL}};

static PyGetSetDef RingBuffer_getset[] = {{"capacity", (getter)RingBuffer_capacity, NULL, "samples it holds", NULL},
                                          {NULL}};

static PyTypeObject RingBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hub_runtime._native.RingBuffer",
    .tp_basicsize = sizeof(RingBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Single-producer single-consumer ring of int16 samples",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RingBuffer_init,
    .tp_dealloc = (destructor)RingBuffer_dealloc,
    .tp_methods = RingBuffer_methods,
    .tp_getset = RingBuffer_getset,
};

static PyMethodDef methods[] = {
    {"frame_rms", frame_rms, METH_O, "frame_rms(int16 frame) -> RMS in int16 units"},
    {"int16_to_float", int16_to_float, METH_VARARGS, "int16_to_float(src, dst): dst = src / 32768"},
    {"float_to_int16", float_to_int16, METH_VARARGS, "float_to_int16(src, dst): dst = clip(round(src * 32768))"},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "The audio hot path in C.", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ResamplerType) < 0 || PyType_Ready(&RingBufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ResamplerType);
    Py_INCREF(&RingBufferType);
    if (PyModule_AddObject(m, "Resampler", (PyObject *)&ResamplerType) < 0 ||
        PyModule_AddObject(m, "RingBuffer", (PyObject *)&RingBufferType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "HALF_TAPS", HALF_TAPS);
    return m;
}
