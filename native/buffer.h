/*
 * The one buffer check of the C extensions (native/duplex_audio.c, native/echo.c): a
 * C-contiguous buffer of int16 ("h") or float32 ("f") samples, writable if asked, else a
 * TypeError naming the argument. Static: each extension module gets its own copy.
 */
#ifndef DUPLEX_HUB_BUFFER_H
#define DUPLEX_HUB_BUFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static int get_buffer(PyObject *obj, Py_buffer *view, const char *fmt, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != (fmt[0] == 'h' ? 2 : 4) || (view->format && strcmp(view->format, fmt) != 0 &&
                                                       !(fmt[0] == 'h' && strcmp(view->format, "<h") == 0) &&
                                                       !(fmt[0] == 'f' && strcmp(view->format, "<f") == 0))) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous %s buffer", what, fmt[0] == 'h' ? "int16" : "float32");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#endif
