/*
 * hub_runtime._echo: the speex echo canceller and preprocessor, in C.
 *
 * A second extension because it links Debian's libspeexdsp (libspeexdsp-dev at build
 * time): without it only this module is missing and hub_runtime/audio/echo_twin.py, the
 * numpy twin (the same MDF filter family and residual suppression), runs instead.
 *
 *   EchoCanceller(frame, filter, rate, suppress_db=-40, suppress_active_db=-15, noise_db=0)
 *       .process(int16[] mic, int16[] reference, int16[] out[, int16[] now])
 *                                                                one frame, nothing allocated
 *       .reset()                                                 forget the room
 *       .frame, .filter, .rate, .suppressing                     read-only
 *
 * ``reference`` is what the speaker played in the same frame; ``out`` is a buffer of its own.
 * ``out`` is a frame late (the preprocessor works by overlap-add); ``now``, when given, gets
 * the linear filter's output for this very frame, before the preprocessor: the same
 * audio, not late, without the residual suppression (all there is while the hub is silent).
 * The residual echo that the linear filter leaves is suppressed by the preprocessor by
 * ``suppress_db`` while only the hub talks and by ``suppress_active_db`` while someone talks
 * over it (a barge-in must survive: less suppression there). Speex applies that gain only with
 * its denoiser on, so the denoiser runs with a floor of ``noise_db`` (0: stationary noise is
 * kept, the recogniser is trained with it) -- and only while the hub's voice can be in the
 * room (the reference played within the last echo tail): its gain also dims the onsets of
 * quiet speech, which the wake word and the VAD need whole when the hub is silent. AGC,
 * dereverb and the preprocessor's VAD stay off: the VAD stage decides speech. The GIL is
 * released while the filter runs, so rooms in threads cancel in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
#include <string.h>

#include "buffer.h"

typedef struct {
    PyObject_HEAD
    SpeexEchoState *echo;
    SpeexPreprocessState *pre;
    int frame, filter, rate;
    int quiet;      /* samples since the reference last played something */
    int suppressing; /* the preprocessor's gain is on (the hub's voice can be in the room) */
} EchoObject;

static int int16_view(PyObject *obj, Py_buffer *view, int writable, const char *what, int samples) {
    if (get_buffer(obj, view, "h", writable, what) < 0) return -1;
    if (view->len / 2 != samples) {
        PyErr_Format(PyExc_ValueError, "%s has %zd samples, the frame is %d", what, view->len / 2, samples);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void echo_free_states(EchoObject *self) {
    if (self->pre) speex_preprocess_state_destroy(self->pre);
    if (self->echo) speex_echo_state_destroy(self->echo);
    self->pre = NULL;
    self->echo = NULL;
}

static int Echo_init(EchoObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"frame", "filter", "rate", "suppress_db", "suppress_active_db", "noise_db", NULL};
    int frame, filter, rate, suppress = -40, active = -15, noise = 0, off = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iii|iii", names, &frame, &filter, &rate, &suppress, &active, &noise))
        return -1;
    if (frame <= 0 || filter < frame || rate <= 0) {
        PyErr_SetString(PyExc_ValueError, "frame and rate must be positive and the filter at least one frame");
        return -1;
    }
    if (suppress > 0 || active > 0 || noise > 0) {
        PyErr_SetString(PyExc_ValueError, "suppression levels are attenuations: 0 dB or less");
        return -1;
    }
    echo_free_states(self);
    self->echo = speex_echo_state_init(frame, filter);
    self->pre = speex_preprocess_state_init(frame, rate);
    if (!self->echo || !self->pre) {
        echo_free_states(self);
        PyErr_NoMemory();
        return -1;
    }
    speex_echo_ctl(self->echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_DENOISE, &off);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &noise);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_AGC, &off);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_DEREVERB, &off);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_ECHO_STATE, self->echo);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, &suppress);
    speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, &active);
    self->frame = frame;
    self->filter = filter;
    self->rate = rate;
    self->quiet = filter + 1;
    self->suppressing = 0;
    return 0;
}

static void Echo_dealloc(EchoObject *self) {
    echo_free_states(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Echo_process(EchoObject *self, PyObject *args) {
    PyObject *mic_o, *ref_o, *out_o, *now_o = Py_None;
    Py_buffer mic, ref, out, now = {0};
    if (!PyArg_ParseTuple(args, "OOO|O", &mic_o, &ref_o, &out_o, &now_o)) return NULL;
    if (!self->echo) {
        PyErr_SetString(PyExc_RuntimeError, "the echo canceller is not initialised");
        return NULL;
    }
    if (int16_view(mic_o, &mic, 0, "mic", self->frame) < 0) return NULL;
    if (int16_view(ref_o, &ref, 0, "reference", self->frame) < 0) {
        PyBuffer_Release(&mic);
        return NULL;
    }
    if (int16_view(out_o, &out, 1, "out", self->frame) < 0) {
        PyBuffer_Release(&mic);
        PyBuffer_Release(&ref);
        return NULL;
    }
    if (out.buf == mic.buf || out.buf == ref.buf) {
        PyBuffer_Release(&mic);
        PyBuffer_Release(&ref);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "out must be a buffer of its own, not mic or reference");
        return NULL;
    }
    if (now_o != Py_None) {
        if (int16_view(now_o, &now, 1, "now", self->frame) < 0) {
            PyBuffer_Release(&mic);
            PyBuffer_Release(&ref);
            PyBuffer_Release(&out);
            return NULL;
        }
        if (now.buf == mic.buf || now.buf == ref.buf || now.buf == out.buf) {
            PyBuffer_Release(&mic);
            PyBuffer_Release(&ref);
            PyBuffer_Release(&out);
            PyBuffer_Release(&now);
            PyErr_SetString(PyExc_ValueError, "now must be a buffer of its own, not mic, reference or out");
            return NULL;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    const spx_int16_t *r = (const spx_int16_t *)ref.buf;
    int played = 0;
    for (int i = 0; i < self->frame && !played; i++) played = r[i] != 0;
    self->quiet = played ? 0 : (self->quiet > self->filter ? self->quiet : self->quiet + self->frame);
    int suppressing = self->quiet <= self->filter;
    if (suppressing != self->suppressing) {
        speex_preprocess_ctl(self->pre, SPEEX_PREPROCESS_SET_DENOISE, &suppressing);
        self->suppressing = suppressing;
    }
    speex_echo_cancellation(self->echo, (const spx_int16_t *)mic.buf, (const spx_int16_t *)ref.buf,
                            (spx_int16_t *)out.buf);
    if (now.buf) memcpy(now.buf, out.buf, (size_t)self->frame * sizeof(spx_int16_t));
    speex_preprocess_run(self->pre, (spx_int16_t *)out.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&mic);
    PyBuffer_Release(&ref);
    PyBuffer_Release(&out);
    if (now.buf) PyBuffer_Release(&now);
    Py_RETURN_NONE;
}

static PyObject *Echo_reset(EchoObject *self, PyObject *unused) {
    if (self->echo) speex_echo_state_reset(self->echo);
    self->quiet = self->filter + 1;
    Py_RETURN_NONE;
}

static PyObject *Echo_frame(EchoObject *self, void *c) { return PyLong_FromLong(self->frame); }
static PyObject *Echo_filter(EchoObject *self, void *c) { return PyLong_FromLong(self->filter); }
static PyObject *Echo_rate(EchoObject *self, void *c) { return PyLong_FromLong(self->rate); }
static PyObject *Echo_suppressing(EchoObject *self, void *c) { return PyBool_FromLong(self->suppressing); }

static PyMethodDef Echo_methods[] = {
    {"process", (PyCFunction)Echo_process, METH_VARARGS,
     "process(mic, reference, out[, now]): cancel one frame (out a frame late; now this frame, unsuppressed)"},
    {"reset", (PyCFunction)Echo_reset, METH_NOARGS, "forget the adapted echo path"},
    {NULL}};

static PyGetSetDef Echo_getset[] = {
    {"frame", (getter)Echo_frame, NULL, "samples per frame", NULL},
    {"filter", (getter)Echo_filter, NULL, "echo tail in samples", NULL},
    {"rate", (getter)Echo_rate, NULL, "sample rate in Hz", NULL},
    {"suppressing", (getter)Echo_suppressing, NULL, "residual echo suppression is on (the hub played within the echo tail)", NULL},
    {NULL}};

static PyTypeObject EchoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hub_runtime._echo.EchoCanceller",
    .tp_basicsize = sizeof(EchoObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "speex echo canceller + residual echo suppression, one frame at a time",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Echo_init,
    .tp_dealloc = (destructor)Echo_dealloc,
    .tp_methods = Echo_methods,
    .tp_getset = Echo_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_echo", "speex echo cancellation (native/echo.c)", -1, NULL};

PyMODINIT_FUNC PyInit__echo(void) {
    if (PyType_Ready(&EchoType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EchoType);
    if (PyModule_AddObject(m, "EchoCanceller", (PyObject *)&EchoType) < 0) {
        Py_DECREF(&EchoType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
