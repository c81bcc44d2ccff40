/*
 * _core_args.c - Python values to core values and back.
 *
 * Every module function and the Tensor type parse their arguments and raise
 * their errors the same way: these are the one copy of each parser (format,
 * dtype, device, copy=, int sequences) and of the status -> exception map,
 * so a message or an accepted spelling changes in one place.
 */
#include "_core.h"

#include <string.h>

/* ------------------------------------------------------- errors and names */

/* For an operation whose operand has the wrong dtype (a complex operation
 * given an integer tensor): TypeError, as NumPy and torch raise.  Import
 * problems stay BufferErrors (_plext_raise_status). */
PyObject *_plext_raise_operand_status(pylayout_status st)
{
    if (st == PYLAYOUT_ERR_UNSUPPORTED_DTYPE) {
        const char *detail = pylayout_last_error();
        PyErr_SetString(PyExc_TypeError, detail[0] ? detail : pylayout_strerror(st));
        return NULL;
    }
    return _plext_raise_status(st);
}

/* Raises the exception users expect for a pylayout status and returns NULL. */
PyObject *_plext_raise_status(pylayout_status st)
{
    PyObject *type;
    switch (st) {
    case PYLAYOUT_ERR_NO_MEMORY:
        type = PyExc_MemoryError;
        break;
    case PYLAYOUT_ERR_INVALID_TENSOR:
    case PYLAYOUT_ERR_UNSUPPORTED_DTYPE:
    case PYLAYOUT_ERR_UNSUPPORTED_DEVICE:
    case PYLAYOUT_ERR_UNSUPPORTED_VERSION:
        type = PyExc_BufferError;
        break;
    case PYLAYOUT_ERR_DTYPE_MISMATCH:
        type = PyExc_TypeError;
        break;
    default:
        type = PyExc_ValueError;
        break;
    }
    const char *detail = pylayout_last_error();
    PyErr_SetString(type, detail[0] ? detail : pylayout_strerror(st));
    return NULL;
}

/* Accepts a format name, torch's memory_format objects (by their str(), so
 * torch need not be imported) and NumPy's "C" / "F"; torch.preserve_format
 * where allow_preserve. */
static int parse_format_ex(PyObject *obj, pylayout_format *fmt, bool allow_preserve)
{
    PyObject *s = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
    if (!s)
        return -1;
    const char *name = PyUnicode_AsUTF8(s);
    int rc = -1;
    if (!name)
        goto done;
    if (allow_preserve && !strcmp(name, "torch.preserve_format")) {
        *fmt = FORMAT_PRESERVE;
        rc = 0;
    } else if (pylayout_format_from_name(name, fmt) == PYLAYOUT_OK) {
        rc = 0;
    } else {
        PyErr_Format(PyExc_ValueError,
                     "unknown memory format %R; use 'contiguous' (or 'C'), 'channels_last', 'channels_last_3d', "
                     "'fortran' (or 'F')%s or a torch.memory_format",
                     obj, allow_preserve ? ", torch.preserve_format" : "");
    }
done:
    Py_DECREF(s);
    return rc;
}

int _plext_parse_format(PyObject *obj, pylayout_format *fmt)
{
    return parse_format_ex(obj, fmt, false);
}

/* format= or torch's memory_format= (not both) into *fmt. */
int _plext_parse_format_args(PyObject *format, PyObject *memory_format, pylayout_format *fmt, bool allow_preserve)
{
    if (format && memory_format && memory_format != Py_None) {
        PyErr_SetString(PyExc_TypeError, "give format or memory_format, not both");
        return -1;
    }
    PyObject *f = memory_format && memory_format != Py_None ? memory_format : format;
    return f ? parse_format_ex(f, fmt, allow_preserve) : 0;
}

/* copy= as the Array API means it: None copies only if needed (-1), True
 * always copies (1), False never does (0: raise if a copy is needed). */
int _plext_parse_copy(PyObject *copy, int *want)
{
    if (copy == Py_None) {
        *want = -1;
        return 0;
    }
    *want = PyObject_IsTrue(copy);
    return *want < 0 ? -1 : 0;
}

/* Accepts a dtype name ("float32") or anything whose str() is one, such as
 * torch.float32 or numpy.dtype('float32'). */
int _plext_parse_dtype(PyObject *obj, DLDataType *dt)
{
    /* A scalar type (numpy.float32, numpy.bool_) names its dtype by __name__. */
    PyObject *s = PyUnicode_Check(obj) ? Py_NewRef(obj)
                  : PyType_Check(obj)  ? PyObject_GetAttrString(obj, "__name__")
                                       : PyObject_Str(obj);
    if (!s)
        return -1;
    const char *name = PyUnicode_AsUTF8(s);
    int rc = -1;
    if (name) {
        if (!strncmp(name, "torch.", 6))
            name += 6;
        char trimmed[32];
        size_t len = strlen(name);
        if (len > 1 && len < sizeof trimmed && name[len - 1] == '_') { /* numpy.bool_, numpy.str_ */
            memcpy(trimmed, name, len - 1);
            trimmed[len - 1] = '\0';
            name = trimmed;
        }
        rc = pylayout_dtype_from_name(name, dt) == PYLAYOUT_OK ? 0 : -1;
        if (rc)
            PyErr_Format(PyExc_ValueError, "unknown dtype %R; use a name such as 'float32'", obj);
    }
    Py_DECREF(s);
    return rc;
}

PyObject *_plext_int64_tuple(const int64_t *v, int32_t n)
{
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* Reads a sequence of ints.  A snapshot (a tuple) is taken first: an item's
 * __index__ may run any Python code, including code that empties the
 * sequence it came from. */
int _plext_parse_int64_seq(PyObject *seq, const char *what, int64_t *out, int32_t *n)
{
    PyObject *items = PySequence_Tuple(seq);
    if (!items) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s, got %.200s", what, Py_TYPE(seq)->tp_name);
        }
        return -1;
    }
    Py_ssize_t len = PyTuple_GET_SIZE(items);
    int rc = -1;
    if (len > PYLAYOUT_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries; pylayout supports at most %d dims", what, len,
                     PYLAYOUT_MAX_NDIM);
        goto done;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(items, i));
        if (out[i] == -1 && PyErr_Occurred())
            goto done;
    }
    *n = (int32_t)len;
    rc = 0;
done:
    Py_DECREF(items);
    return rc;
}

/* Parses a dim order (a sequence of ints, outermost dim first) into
 * order[0 .. *n).  An entry outside [0, *n) becomes -1, which every core
 * call refuses as not a permutation, with its own message. */
int _plext_parse_order(PyObject *seq, int32_t *order, int32_t *n)
{
    int64_t order64[PYLAYOUT_MAX_NDIM];
    if (_plext_parse_int64_seq(seq, "order must be a sequence of ints", order64, n) < 0)
        return -1;
    for (int32_t i = 0; i < *n; i++)
        order[i] = order64[i] < 0 || order64[i] >= *n ? -1 : (int32_t)order64[i];
    return 0;
}

/* Parses device=: None, "cpu", a (type, id) pair, or anything with
 * __dlpack_device__.  Returns 0 and sets *given = 0 for None. */
int _plext_parse_device(PyObject *obj, DLDevice *dev, int *given)
{
    *given = 0;
    if (obj == Py_None)
        return 0;
    *given = 1;
    if (PyUnicode_Check(obj) && PyUnicode_CompareWithASCIIString(obj, "cpu") == 0) {
        *dev = (DLDevice){kDLCPU, 0};
        return 0;
    }
    PyObject *pair = NULL;
    if (PyTuple_Check(obj))
        pair = Py_NewRef(obj);
    else if (PyObject_HasAttrString(obj, "__dlpack_device__"))
        pair = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int type = 0, id = 0;
    if (!pair || !PyTuple_Check(pair) || !PyArg_ParseTuple(pair, "ii", &type, &id)) {
        Py_XDECREF(pair);
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "device must be None, 'cpu' or a (device_type, device_id) pair, got %R",
                     obj);
        return -1;
    }
    Py_DECREF(pair);
    *dev = (DLDevice){(DLDeviceType)type, id};
    return 0;
}

int _plext_check_host(const DLTensor *dl, const char *what)
{
    if (is_host(dl->device))
        return 0;
    PyErr_Format(PyExc_BufferError,
                 "%s lives on device '%s' (device type %d, not CPU memory); pylayout moves the data of CPU "
                 "tensors itself and of torch tensors on any device through torch, so pass a torch.Tensor "
                 "on that device (torch.from_dlpack(x)) or copy it to the CPU; layout queries and zero-copy "
                 "views work here as they are",
                 what, device_name_or(dl->device.device_type, "unknown"), (int)dl->device.device_type);
    return -1;
}
