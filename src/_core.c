/*
 * _core.c - the CPython extension pylayout._core: thin glue over the C core.
 *
 * It parses arguments, moves tensors in and out through DLPack (the C
 * exchange API when the producer's type offers one, __dlpack__ otherwise),
 * releases the GIL around copies and maps statuses to exceptions.  Layout
 * logic lives in the C core, which C users call directly.
 *
 * Multi-phase initialisation (PEP 489); all state lives in module state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include <pylayout.h> /* the extension is a client of the public API, like any C user */

/* ------------------------------------------------------------------ state */

/* What producer_of() learnt about one producer type.  `type` is not a
 * reference: the entry is used only when type(x) is that address and its
 * version tag is still `tag`, which proves it is the same, unmodified type. */
typedef struct {
    PyTypeObject *type;
    unsigned int tag; /* 0: not cacheable */
    const DLPackExchangeAPI *api;
    bool is_torch;
} producer_entry;

#define PRODUCER_SLOTS 64

typedef struct {
    PyTypeObject *TensorType;
    PyObject *str_dlpack;        /* "__dlpack__" */
    PyObject *str_exchange;      /* "__dlpack_c_exchange_api__" */
    PyObject *kw_max_version;    /* {"max_version": (1, 0)} */
    PyObject *increment_version; /* torch.autograd.graph.increment_version, once needed */
    producer_entry producers[PRODUCER_SLOTS];
} core_state;

/* The current exception as one object (PEP 3134 style), on every Python. */
#if PY_VERSION_HEX >= 0x030C0000
#define PyErr_GetRaisedException_compat PyErr_GetRaisedException
#define PyErr_SetRaisedException_compat PyErr_SetRaisedException
#else
static PyObject *PyErr_GetRaisedException_compat(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!type)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

static void PyErr_SetRaisedException_compat(PyObject *exc)
{
    if (!exc) {
        PyErr_Clear();
        return;
    }
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}
#endif

static inline core_state *get_state(PyObject *module)
{
    return (core_state *)PyModule_GetState(module);
}

typedef struct {
    PyObject_HEAD
    pylayout_tensor *tensor;
    const DLTensor *dl; /* the tensor's own DLTensor, cached */
    uint64_t flags;
} TensorObject;

static const char VERSIONED_NAME[] = "dltensor_versioned";
static const char USED_VERSIONED_NAME[] = "used_dltensor_versioned";
static const char LEGACY_NAME[] = "dltensor";
static const char USED_LEGACY_NAME[] = "used_dltensor";
static const char EXCHANGE_NAME[] = "dlpack_exchange_api";

/* ------------------------------------------------------- errors and names */

static PyObject *raise_status(pylayout_status st);

/* For an operation whose operand has the wrong dtype (a complex operation
 * given an integer tensor): TypeError, as NumPy and torch raise.  Import
 * problems stay BufferErrors (raise_status). */
static PyObject *raise_operand_status(pylayout_status st)
{
    if (st == PYLAYOUT_ERR_UNSUPPORTED_DTYPE) {
        const char *detail = pylayout_last_error();
        PyErr_SetString(PyExc_TypeError, detail[0] ? detail : pylayout_strerror(st));
        return NULL;
    }
    return raise_status(st);
}

/* Raises the exception users expect for a pylayout status and returns NULL. */
static PyObject *raise_status(pylayout_status st)
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

static const char *format_name(pylayout_format fmt)
{
    const char *name = "?";
    pylayout_format_name(fmt, &name);
    return name;
}

/* torch.preserve_format: keep a dense tensor as it is, else copy it in its
 * own stride order (pylayout_like_order: torch's meaning for clone and
 * empty_like).  Not a pylayout_format: only the functions that take it know it. */
#define FORMAT_PRESERVE ((pylayout_format)-1)

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

static int parse_format(PyObject *obj, pylayout_format *fmt)
{
    return parse_format_ex(obj, fmt, false);
}

/* format= or torch's memory_format= (not both) into *fmt. */
static int parse_format_args(PyObject *format, PyObject *memory_format, pylayout_format *fmt, bool allow_preserve)
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
static int parse_copy(PyObject *copy, int *want)
{
    if (copy == Py_None) {
        *want = -1;
        return 0;
    }
    *want = PyObject_IsTrue(copy);
    return *want < 0 ? -1 : 0;
}

static const char *dtype_name_or(DLDataType dt, const char *fallback)
{
    const char *name = NULL;
    return pylayout_dtype_name(dt, &name) == PYLAYOUT_OK ? name : fallback;
}

/* Bytes per element of a tensor's dtype: every pylayout tensor has a
 * supported dtype, so this never fails for one. */
static size_t itemsize_of(DLDataType dt)
{
    size_t n = 0;
    pylayout_dtype_itemsize(dt, &n);
    return n;
}

static bool is_host(DLDevice device)
{
    bool host = false;
    pylayout_device_is_host(device, &host);
    return host;
}

static const char *device_name_or(int32_t device_type, const char *fallback)
{
    const char *name = NULL;
    return pylayout_device_name(device_type, &name) == PYLAYOUT_OK ? name : fallback;
}

/* Accepts a dtype name ("float32") or anything whose str() is one, such as
 * torch.float32 or numpy.dtype('float32'). */
static int parse_dtype(PyObject *obj, DLDataType *dt)
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

static int64_t numel_of(const DLTensor *dl)
{
    int64_t n = 1;
    for (int32_t d = 0; d < dl->ndim; d++)
        n *= dl->shape[d];
    return n;
}

/* ------------------------------------------------------------ Tensor type */

/* pylayout_tensor_release, keeping any pending Python exception: the last
 * release runs the producer's deleter, which may run Python code (NumPy's
 * does), and must neither see nor clobber an error being raised. */
static void release(pylayout_tensor *t)
{
    if (!t)
        return;
    PyObject *exc = PyErr_GetRaisedException_compat();
    pylayout_tensor_release(t);
    if (exc)
        PyErr_SetRaisedException_compat(exc);
}

static PyObject *wrap_tensor(core_state *state, pylayout_tensor *t)
{
    /* Steals the reference to t. */
    TensorObject *self = PyObject_New(TensorObject, state->TensorType);
    if (!self) {
        release(t);
        return NULL;
    }
    self->tensor = t;
    pylayout_tensor_dltensor(t, &self->dl);
    pylayout_tensor_flags(t, &self->flags);
    return (PyObject *)self;
}

/* A new Tensor owning the producer's managed tensor m (ownership is
 * stolen: m's deleter runs on every failure path, as the DLPack spec and the
 * exchange API ask). */
static PyObject *wrap_managed(core_state *state, DLManagedTensorVersioned *m)
{
    pylayout_tensor *t;
    pylayout_status st = pylayout_tensor_from_versioned(m, &t);
    if (st != PYLAYOUT_OK) {
        if (m->deleter)
            m->deleter(m);
        return raise_status(st);
    }
    return wrap_tensor(state, t);
}

static void Tensor_dealloc(PyObject *op)
{
    TensorObject *self = (TensorObject *)op;
    PyTypeObject *tp = Py_TYPE(op);
    release(self->tensor);
    PyObject_Free(op);
    Py_DECREF(tp);
}

static PyObject *int64_tuple(const int64_t *v, int32_t n)
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

static PyObject *Tensor_get_shape(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    return int64_tuple(dl->shape, dl->ndim);
}

static PyObject *Tensor_get_strides(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    return int64_tuple(dl->strides, dl->ndim);
}

static PyObject *Tensor_get_dtype(PyObject *op, void *c)
{
    (void)c;
    return PyUnicode_FromString(dtype_name_or(((TensorObject *)op)->dl->dtype, "unknown"));
}

static PyObject *Tensor_get_device(PyObject *op, void *c)
{
    (void)c;
    DLDevice dev = ((TensorObject *)op)->dl->device;
    return Py_BuildValue("(ii)", (int)dev.device_type, (int)dev.device_id);
}

static PyObject *Tensor_get_device_name(PyObject *op, void *c)
{
    (void)c;
    const char *name = NULL;
    int32_t type = ((TensorObject *)op)->dl->device.device_type;
    if (pylayout_device_name(type, &name) == PYLAYOUT_OK)
        return PyUnicode_FromString(name);
    return PyUnicode_FromFormat("device type %d", (int)type);
}

static PyObject *Tensor_get_ndim(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromLong(((TensorObject *)op)->dl->ndim);
}

static PyObject *Tensor_get_itemsize(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromSize_t(itemsize_of(((TensorObject *)op)->dl->dtype));
}

static PyObject *Tensor_get_nbytes(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    /* numel fits int64 (checked at import); times itemsize may not: a
     * broadcast view can describe more than 2^63 bytes (rule 4). */
    unsigned __int128 n = (unsigned __int128)(uint64_t)numel_of(dl) * itemsize_of(dl->dtype);
    if (n <= UINT64_MAX)
        return PyLong_FromUnsignedLongLong((unsigned long long)n);
    PyObject *a = PyLong_FromLongLong(numel_of(dl)), *b = a ? PyLong_FromSize_t(itemsize_of(dl->dtype)) : NULL;
    PyObject *r = b ? PyNumber_Multiply(a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

static PyObject *Tensor_get_data_ptr(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(((TensorObject *)op)->dl->data);
}

static PyObject *Tensor_get_byte_offset(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((TensorObject *)op)->dl->byte_offset);
}

static PyObject *Tensor_get_readonly(PyObject *op, void *c)
{
    (void)c;
    return PyBool_FromLong((((TensorObject *)op)->flags & PYLAYOUT_FLAG_READ_ONLY) != 0);
}

static PyGetSetDef Tensor_getset[] = {
    {"shape", Tensor_get_shape, NULL, "Size of each dimension (tuple of int).", NULL},
    {"strides", Tensor_get_strides, NULL, "Stride of each dimension, in elements (tuple of int).", NULL},
    {"dtype", Tensor_get_dtype, NULL, "Element type name, e.g. 'float32'.", NULL},
    {"device", Tensor_get_device, NULL, "(DLPack device type, device id); (1, 0) is the CPU.", NULL},
    {"device_name", Tensor_get_device_name, NULL, "The device's short name: 'cpu', 'cuda', 'rocm', ...", NULL},
    {"ndim", Tensor_get_ndim, NULL, "Number of dimensions.", NULL},
    {"itemsize", Tensor_get_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", Tensor_get_nbytes, NULL, "numel * itemsize.", NULL},
    {"data_ptr", Tensor_get_data_ptr, NULL,
     "DLTensor.data as an int; element 0 lives at data_ptr + byte_offset.", NULL},
    {"byte_offset", Tensor_get_byte_offset, NULL, "DLTensor.byte_offset.", NULL},
    {"readonly", Tensor_get_readonly, NULL, "True if the producer marked the memory read-only.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *Tensor_repr(PyObject *op)
{
    const DLTensor *dl = ((TensorObject *)op)->dl;
    PyObject *shape = NULL, *strides = NULL, *res = NULL;
    bool c = false, cl = false, cl3 = false, f = false;
    shape = int64_tuple(dl->shape, dl->ndim);
    strides = int64_tuple(dl->strides, dl->ndim);
    if (!shape || !strides)
        goto done;
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_CONTIGUOUS, &c);
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_CHANNELS_LAST, &cl);
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, &cl3);
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_FORTRAN, &f);
    char fmts[80] = "";
    if (c)
        strcat(fmts, ", contiguous");
    if (cl)
        strcat(fmts, ", channels_last");
    if (cl3)
        strcat(fmts, ", channels_last_3d");
    if (f && dl->ndim > 1)
        strcat(fmts, ", fortran");
    if (!c && !cl && !cl3 && !f)
        strcat(fmts, ", strided");
    res = PyUnicode_FromFormat("pylayout.Tensor(shape=%R, strides=%R, dtype='%s', device=(%d, %d)%s%s%s)", shape,
                               strides, dtype_name_or(dl->dtype, "unknown"), (int)dl->device.device_type,
                               (int)dl->device.device_id, fmts,
                               (((TensorObject *)op)->flags & PYLAYOUT_FLAG_READ_ONLY) ? ", readonly" : "",
                               dl->byte_offset ? ", byte_offset" : "");
done:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return res;
}

/* ------------------------------------------------------ buffer protocol */

static const char *buffer_format(DLDataType dt)
{
    switch (dt.code) {
    case kDLBool: return dt.bits == 8 ? "?" : NULL;
    case kDLInt:
        switch (dt.bits) { case 8: return "b"; case 16: return "h"; case 32: return "i"; case 64: return "q"; }
        return NULL;
    case kDLUInt:
        switch (dt.bits) { case 8: return "B"; case 16: return "H"; case 32: return "I"; case 64: return "Q"; }
        return NULL;
    case kDLFloat:
        switch (dt.bits) { case 16: return "e"; case 32: return "f"; case 64: return "d"; }
        return NULL;
    case kDLComplex:
        switch (dt.bits) { case 64: return "Zf"; case 128: return "Zd"; }
        return NULL;
    }
    return NULL;
}

static char zero_size_buffer[1];

static int Tensor_getbuffer(PyObject *op, Py_buffer *view, int flags)
{
    TensorObject *self = (TensorObject *)op;
    const DLTensor *dl = self->dl;
    if (!is_host(dl->device)) {
        PyErr_Format(PyExc_BufferError,
                     "the buffer protocol needs CPU memory; this tensor lives on device type %d; use "
                     "DLPack (__dlpack__) to hand it to a library for that device",
                     (int)dl->device.device_type);
        return -1;
    }
    const char *fmt = buffer_format(dl->dtype);
    if (!fmt) {
        PyErr_Format(PyExc_BufferError,
                     "dtype %s has no buffer-protocol format code; use DLPack (numpy.from_dlpack or "
                     "torch.from_dlpack) instead",
                     dtype_name_or(dl->dtype, "unknown"));
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && (self->flags & PYLAYOUT_FLAG_READ_ONLY)) {
        PyErr_SetString(PyExc_BufferError, "the tensor is read-only; ask for a read-only buffer");
        return -1;
    }
    bool c = false, f = false;
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_CONTIGUOUS, &c);
    pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_FORTRAN, &f);
    if (((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c) ||
        ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f) ||
        ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c && !f) ||
        ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c)) {
        PyErr_SetString(PyExc_BufferError,
                        "the tensor is not contiguous in the requested order; convert it first "
                        "(pylayout.contiguous) or ask for a strided buffer");
        return -1;
    }
    Py_ssize_t itemsize = (Py_ssize_t)itemsize_of(dl->dtype);
    int64_t n = numel_of(dl), len;
    /* The buffer protocol counts in bytes: every byte stride and the length
     * must fit Py_ssize_t, or the buffer cannot be described (rule 4). */
    bool too_big = __builtin_mul_overflow(n, (int64_t)itemsize, &len);
    for (int32_t d = 0; d < dl->ndim && !too_big; d++) {
        int64_t bs;
        too_big = __builtin_mul_overflow(dl->strides[d], (int64_t)itemsize, &bs);
    }
    if (too_big) {
        PyErr_SetString(PyExc_BufferError,
                        "the tensor is too big for the buffer protocol: its length or a stride in bytes does "
                        "not fit a Py_ssize_t; use DLPack (__dlpack__), which counts in elements");
        return -1;
    }
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)(dl->ndim ? dl->ndim : 1));
    if (!dims) {
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t d = 0; d < dl->ndim; d++) {
        dims[d] = (Py_ssize_t)dl->shape[d];
        dims[dl->ndim + d] = (Py_ssize_t)(dl->strides[d] * itemsize);
    }
    view->buf = n ? (char *)dl->data + dl->byte_offset : (void *)zero_size_buffer;
    view->obj = Py_NewRef(op);
    view->len = (Py_ssize_t)len;
    view->readonly = (self->flags & PYLAYOUT_FLAG_READ_ONLY) != 0;
    view->itemsize = itemsize;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->ndim = dl->ndim;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND && dl->ndim ? dims : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES && dl->ndim ? dims + dl->ndim : NULL;
    if ((flags & PyBUF_ND) != PyBUF_ND) {
        /* A flat-bytes request (PyBUF_SIMPLE): one dim, as PyBuffer_FillInfo
         * reports it (consumers then read itemsize as 1, as NumPy's do). */
        view->ndim = 1;
    }
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

static void Tensor_releasebuffer(PyObject *op, Py_buffer *view)
{
    (void)op;
    PyMem_Free(view->internal);
}

/* --------------------------------------------------------------- capsules */

static void versioned_capsule_destructor(PyObject *capsule)
{
    /* Runs only the deleter of a capsule nobody consumed. */
    if (!PyCapsule_IsValid(capsule, VERSIONED_NAME))
        return;
    PyObject *exc = PyErr_GetRaisedException_compat();
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
    if (m && m->deleter)
        m->deleter(m);
    if (exc)
        PyErr_SetRaisedException_compat(exc);
}

static void legacy_capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, LEGACY_NAME))
        return;
    PyObject *exc = PyErr_GetRaisedException_compat();
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
    if (m && m->deleter)
        m->deleter(m);
    if (exc)
        PyErr_SetRaisedException_compat(exc);
}

/* Consumes a DLPack capsule (renaming it "used_...") into a new Tensor.
 * The capsule is marked consumed before the import and unmarked if the
 * import fails, so exactly one of the capsule and the Tensor ever owns the
 * producer's deleter. */
static PyObject *tensor_from_capsule(core_state *state, PyObject *capsule)
{
    pylayout_tensor *t = NULL;
    pylayout_status st;
    const char *name = PyCapsule_GetName(capsule);
    if (!name && PyErr_Occurred())
        return NULL;
    if (name && !strcmp(name, VERSIONED_NAME)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
        if (!m || PyCapsule_SetName(capsule, USED_VERSIONED_NAME) < 0)
            return NULL;
        st = pylayout_tensor_from_versioned(m, &t);
        if (st != PYLAYOUT_OK) {
            PyCapsule_SetName(capsule, VERSIONED_NAME); /* the capsule still owns it */
            return raise_status(st);
        }
    } else if (name && !strcmp(name, LEGACY_NAME)) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
        if (!m || PyCapsule_SetName(capsule, USED_LEGACY_NAME) < 0)
            return NULL;
        st = pylayout_tensor_from_legacy(m, 0, &t);
        if (st != PYLAYOUT_OK) {
            PyCapsule_SetName(capsule, LEGACY_NAME);
            return raise_status(st);
        }
    } else if (name && (!strcmp(name, USED_VERSIONED_NAME) || !strcmp(name, USED_LEGACY_NAME))) {
        PyErr_SetString(PyExc_ValueError,
                        "this DLPack capsule was already consumed; a capsule can be imported only once, "
                        "so call __dlpack__() again for a new one");
        return NULL;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', got one named %s",
                     name ? name : "NULL");
        return NULL;
    }
    return wrap_tensor(state, t);
}

/* ============================================================ the boundary
 *
 * The rules every operation here obeys (docs/reliability.md, "The Python
 * boundary", lists the test of each):
 *
 *  1. Operands first, then memory.  All of an operation's Python-level work
 *     (argument parsing with every __index__, every operand's __dlpack__,
 *     the torch guards, attribute reads on torch tensors) runs first, in
 *     operand_take() and operand_guard().  Only then does operand_memory()
 *     read the data pointers, a torch tensor's through torch's C exchange
 *     API (dltensor_from_py_object_no_sync, which runs no Python), and from
 *     then until the operation is done with the memory no Python code runs:
 *     no Python objects are made, no reference that could run a finaliser is
 *     dropped.  Holding torch's DLPack export does not keep its memory (the
 *     export shares the TensorImpl; set_() and resize_() swap the storage
 *     under it), so a torch pointer is always read late, never kept.
 *     Another *thread* mutating an operand during a copy is a data race, as
 *     it is for torch's own ops.
 *  2. A result that aliases a torch tensor's memory is a torch view of it:
 *     pylayout/__init__.py sends torch tensors to pylayout.torch's view
 *     functions (as_strided, view_as_real, ...), and the view functions here
 *     refuse torch tensors rather than rebuild memory they cannot keep alive.
 *  3. A write into a torch tensor's memory bumps its version counter
 *     (operand_written), so autograd's saved-tensor check sees it.
 *  4. Every size computed from user numbers is checked for overflow (the
 *     buffer export, nbytes; the core validates every DLTensor it is given).
 */

/* What pylayout knows about a producer type: its DLPack C exchange API (or
 * NULL) and whether it is a torch.Tensor type, whose exchange API exports
 * tensors that torch's own __dlpack__ refuses (see torch_guard). */
typedef struct {
    const DLPackExchangeAPI *api;
    bool is_torch;
} producer_info;

static const DLPackExchangeAPI exchange_api; /* ours, defined below */

static bool is_our_tensor(PyObject *obj)
{
    /* By the dealloc slot, not by module state: true in every interpreter
     * and for every copy of the module, and it runs no Python. */
    return Py_TYPE(obj)->tp_dealloc == Tensor_dealloc;
}

/* Gives tp a version tag if it can have one; 0 if not (then nothing about
 * the type is cached).  The tag changes whenever the type or a base is
 * modified (an attribute set or deleted, __bases__ assigned), and a new type
 * never gets an old type's tag. */
static unsigned int type_tag(PyTypeObject *tp, PyObject *name)
{
#if PY_VERSION_HEX >= 0x030C0000
    (void)name;
    if (!PyUnstable_Type_AssignVersionTag(tp))
        return 0;
#else
    (void)_PyType_Lookup(tp, name); /* assigns the tag; no Python code runs */
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
        return 0;
#endif
    return tp->tp_version_tag;
}

/* Finds type(x)'s exchange API without running Python (the MRO's dicts,
 * no descriptors) and caches the answer in a small direct-mapped table,
 * keyed by the type's address and checked by its version tag.  The table
 * holds no references, so producer classes die as they would without
 * pylayout, and a class that gains or loses __dlpack_c_exchange_api__ (or
 * anything else) is looked at afresh.  Returns -1 with an exception set. */
static int producer_of(core_state *state, PyTypeObject *tp, producer_info *info)
{
    producer_entry *e = &state->producers[((uintptr_t)tp >> 4) % PRODUCER_SLOTS];
    if (e->type == tp && e->tag != 0 && tp->tp_version_tag == e->tag
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
        && PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)
#endif
    ) {
        info->api = e->api;
        info->is_torch = e->is_torch;
        return 0;
    }
    const DLPackExchangeAPI *api = NULL;
    bool is_torch = false, found = false;
    PyObject *mro = tp->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!strcmp(base->tp_name, "torch._C.TensorBase"))
            is_torch = true;
        PyObject *v = (!found && base->tp_dict) ? PyDict_GetItemWithError(base->tp_dict, state->str_exchange) : NULL;
        if (v) {
            found = true;
            if (PyCapsule_IsValid(v, EXCHANGE_NAME)) {
                const DLPackExchangeAPI *a = PyCapsule_GetPointer(v, EXCHANGE_NAME);
                if (a && a->header.version.major == DLPACK_MAJOR_VERSION)
                    api = a;
            }
        } else if (PyErr_Occurred()) {
            return -1;
        }
    }
    /* pylayout's own API reads pylayout.Tensor objects only: a class that
     * copied the attribute gets its __dlpack__ called instead. */
    if (api == &exchange_api && tp != state->TensorType)
        api = NULL;
    unsigned int tag = type_tag(tp, state->str_exchange);
    *e = (producer_entry){tp, tag, api, is_torch};
    info->api = api;
    info->is_torch = is_torch;
    return 0;
}

static const DLPackExchangeAPI *exchange_api_of(core_state *state, PyTypeObject *tp)
{
    producer_info info;
    return producer_of(state, tp, &info) < 0 ? NULL : info.api;
}

/* torch's C exchange API exports what torch.Tensor.__dlpack__ refuses:
 * tensors with the conjugate or negative bit set (whose memory holds the
 * un-negated values) and tensors that require grad (whose graph a DLPack
 * round trip would silently cut).  Refuse them the same way, with the fix.
 * Runs Python (a subclass may override any of these): phase 1 only. */
static int torch_guard(PyObject *x)
{
    static const struct {
        const char *method, *message;
    } checks[] = {
        {"is_conj", "the tensor has torch's conjugate bit set, so its memory holds the unconjugated values; "
                    "call x.resolve_conj() first"},
        {"is_neg", "the tensor has torch's negative bit set, so its memory holds the un-negated values; "
                   "call x.resolve_neg() first"},
    };
    PyObject *rg = PyObject_GetAttrString(x, "requires_grad");
    if (!rg)
        return -1;
    int requires_grad = PyObject_IsTrue(rg);
    Py_DECREF(rg);
    if (requires_grad < 0)
        return -1;
    if (requires_grad) {
        PyErr_SetString(PyExc_BufferError,
                        "the tensor requires grad, and passing it through DLPack would cut the autograd graph; "
                        "use pylayout.torch's differentiable conversions, or x.detach() if no gradient "
                        "should flow");
        return -1;
    }
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        PyObject *r = PyObject_CallMethod(x, checks[i].method, NULL);
        if (!r)
            return -1;
        int bit = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (bit < 0)
            return -1;
        if (bit) {
            PyErr_SetString(PyExc_BufferError, checks[i].message);
            return -1;
        }
    }
    return 0;
}

/* A producer's exchange API failed: keep BufferError/TypeError/MemoryError,
 * turn anything else into the BufferError DLPack consumers expect, keeping
 * the producer's message. */
static void *exchange_refused(PyObject *x)
{
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_BufferError, "the producer could not export this tensor");
    if (PyErr_ExceptionMatches(PyExc_BufferError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
        PyErr_ExceptionMatches(PyExc_MemoryError))
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    PyErr_Format(PyExc_BufferError, "%.200s cannot be exported through DLPack: %S", Py_TYPE(x)->tp_name,
                 msg ? msg : Py_None);
    Py_XDECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
}

/* Why torch's exchange API refused `x`, in pylayout's words, when the reason
 * is one pylayout knows (a tensor without strided memory); else NULL and no
 * exception.  Runs Python: only on a failure path, once no memory is used. */
static const char *torch_no_memory_reason(PyObject *x, PyObject **detail)
{
    *detail = NULL;
    PyObject *layout = PyObject_GetAttrString(x, "layout");
    PyObject *name = layout ? PyObject_Str(layout) : NULL;
    Py_XDECREF(layout);
    const char *s = name ? PyUnicode_AsUTF8(name) : NULL;
    const char *why = NULL;
    if (s && strcmp(s, "torch.strided") != 0) {
        *detail = Py_NewRef(name);
        why = "layout";
    } else {
        PyObject *nested = s ? PyObject_GetAttrString(x, "is_nested") : NULL;
        if (nested && PyObject_IsTrue(nested) == 1) {
            why = "nested";
        } else {
            PyObject *dev = s ? PyObject_GetAttrString(x, "device") : NULL;
            PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
            if (type && PyUnicode_Check(type) && PyUnicode_CompareWithASCIIString(type, "meta") == 0)
                why = "meta";
            Py_XDECREF(type);
            Py_XDECREF(dev);
        }
        Py_XDECREF(nested);
    }
    Py_XDECREF(name);
    PyErr_Clear();
    return why;
}

/* torch's exchange API refused x for a data operation: say why. */
static int torch_refused(PyObject *x)
{
    PyObject *saved = PyErr_GetRaisedException_compat();
    PyObject *detail;
    const char *why = torch_no_memory_reason(x, &detail);
    if (!why) {
        PyErr_SetRaisedException_compat(saved);
        exchange_refused(x);
        return -1;
    }
    Py_XDECREF(saved);
    if (!strcmp(why, "layout"))
        PyErr_Format(PyExc_BufferError,
                     "pylayout handles strided tensors; this one has layout %U: call x.to_dense() first", detail);
    else if (!strcmp(why, "nested"))
        PyErr_SetString(PyExc_BufferError,
                        "pylayout handles strided tensors; this one is a nested tensor: call "
                        "x.to_padded_tensor(0) first, or handle each of x.unbind()");
    else
        PyErr_SetString(PyExc_BufferError,
                        "the tensor is on torch's meta device and has no memory: layout queries (is_contiguous, "
                        "suggest_format, is_dense, explain) work on it, operations that read or write data "
                        "do not");
    Py_XDECREF(detail);
    return -1;
}

/* Calls x.__dlpack__(max_version=(1, 0), copy=...), retrying for producers
 * that predate the keywords: first with max_version alone (so a versioned
 * capsule, and its read-only flag, still travels), then with none. */
static PyObject *call_dlpack(core_state *state, PyObject *x, PyObject *copy)
{
    PyObject *meth = PyObject_GetAttr(x, state->str_dlpack);
    if (!meth) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "expected a DLPack producer (an object with __dlpack__, such as a torch.Tensor, a "
                     "numpy.ndarray or a pylayout.Tensor) or a DLPack capsule, got %.200s",
                     Py_TYPE(x)->tp_name);
        return NULL;
    }
    PyObject *res = NULL, *kw = NULL, *empty = PyTuple_New(0);
    if (!empty)
        goto done;
    if (copy != Py_None) {
        kw = PyDict_Copy(state->kw_max_version);
        if (!kw || PyDict_SetItemString(kw, "copy", copy) < 0)
            goto done;
        res = PyObject_Call(meth, empty, kw);
        if (res || !PyErr_ExceptionMatches(PyExc_TypeError))
            goto done;
        PyErr_Clear(); /* no copy= keyword */
    }
    res = PyObject_Call(meth, empty, state->kw_max_version);
    if (!res && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear(); /* a legacy producer: no keywords */
        res = PyObject_CallNoArgs(meth);
    }
done:
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(meth);
    return res;
}

/* Imports any DLPack producer into a new reference to a Tensor that owns
 * the producer's export (for from_dlpack, and for producers whose export
 * does keep their memory: everything but torch). */
static PyObject *import_tensor(core_state *state, PyObject *x, PyObject *copy)
{
    if (Py_IS_TYPE(x, state->TensorType))
        return Py_NewRef(x);
    if (PyCapsule_CheckExact(x))
        return tensor_from_capsule(state, x);
    producer_info info;
    if (producer_of(state, Py_TYPE(x), &info) < 0)
        return NULL;
    if (info.api) {
        DLManagedTensorVersioned *m = NULL;
        if (info.is_torch && torch_guard(x) < 0)
            return NULL;
        if (info.api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
            return info.is_torch ? (torch_refused(x), NULL) : exchange_refused(x);
        return wrap_managed(state, m);
    }
    PyObject *capsule = call_dlpack(state, x, copy);
    if (!capsule)
        return NULL;
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "%.200s.__dlpack__() returned %.200s, not a PyCapsule", Py_TYPE(x)->tp_name,
                     Py_TYPE(capsule)->tp_name);
        Py_DECREF(capsule);
        return NULL;
    }
    PyObject *res = tensor_from_capsule(state, capsule);
    Py_DECREF(capsule);
    return res;
}

/* ------------------------------------------------------------- operands */

/* One operand of an operation, taken in the order rule 1 asks for:
 *   operand_take    phase 1, Python: imports the producer (its __dlpack__,
 *                   or nothing yet for a torch tensor);
 *   operand_guard   phase 1, Python: torch's guards, before data is read;
 *   operand_memory  phase 2, no Python: reads the DLTensor to use now;
 *   operand_written after the memory is done: rule 3;
 *   operand_release last: may run producer deleters, hence Python. */
typedef struct {
    PyObject *obj;                 /* the caller's object (borrowed) */
    PyObject *held;                /* a pylayout.Tensor that keeps the memory alive, or NULL */
    const DLPackExchangeAPI *late; /* read the DLTensor through this in phase 2 */
    bool is_torch;
    bool meta_only;                /* a torch tensor described from its Python metadata */
    uint64_t flags;
    DLTensor scratch;
    const DLTensor *dl;            /* valid from operand_memory until operand_release */
    int64_t dims[2 * PYLAYOUT_MAX_NDIM];
} operand;

static int operand_take(core_state *state, PyObject *obj, operand *op)
{
    memset(op, 0, offsetof(operand, dims));
    op->obj = obj;
    producer_info info = {NULL, false};
    if (!Py_IS_TYPE(obj, state->TensorType) && !PyCapsule_CheckExact(obj) &&
        producer_of(state, Py_TYPE(obj), &info) < 0)
        return -1;
    if (info.api && info.api->dltensor_from_py_object_no_sync) {
        /* torch (and any exchange-API producer): read late, every time */
        op->late = info.api;
        op->is_torch = info.is_torch;
        if (!info.is_torch) { /* others keep their memory with their export: hold it for flags and lifetime */
            DLManagedTensorVersioned *m = NULL;
            if (info.api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) {
                exchange_refused(obj);
                return -1;
            }
            if (!(op->held = wrap_managed(state, m)))
                return -1;
            op->flags = ((TensorObject *)op->held)->flags;
        }
        return 0;
    }
    op->held = import_tensor(state, obj, Py_None);
    if (!op->held)
        return -1;
    op->flags = ((TensorObject *)op->held)->flags;
    return 0;
}

static int operand_guard(operand *op)
{
    return op->is_torch ? torch_guard(op->obj) : 0;
}

/* A torch tensor without exportable memory (meta) described from its sizes,
 * strides and dtype, for metadata queries only.  Runs Python. */
static int torch_metadata(operand *op)
{
    PyObject *detail;
    const char *why = torch_no_memory_reason(op->obj, &detail);
    if (why && strcmp(why, "meta") != 0) {
        Py_XDECREF(detail);
        return torch_refused(op->obj);
    }
    Py_XDECREF(detail);
    PyObject *shape = PyObject_GetAttrString(op->obj, "shape");
    PyObject *shape_t = shape ? PySequence_Tuple(shape) : NULL;
    PyObject *strides = shape_t ? PyObject_CallMethod(op->obj, "stride", NULL) : NULL;
    PyObject *strides_t = strides ? PySequence_Tuple(strides) : NULL;
    PyObject *dtype = strides_t ? PyObject_GetAttrString(op->obj, "dtype") : NULL;
    int rc = -1;
    if (!dtype)
        goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(shape_t);
    if (n > PYLAYOUT_MAX_NDIM || PyTuple_GET_SIZE(strides_t) != n) {
        PyErr_SetString(PyExc_BufferError, "the tensor's sizes and strides cannot be described");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        op->dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_t, i));
        op->dims[PYLAYOUT_MAX_NDIM + i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides_t, i));
        if (PyErr_Occurred())
            goto done;
    }
    DLDataType dt;
    if (parse_dtype(dtype, &dt) < 0)
        goto done;
    PyObject *off = PyObject_CallMethod(op->obj, "storage_offset", NULL);
    long long offset = off ? PyLong_AsLongLong(off) : -1;
    Py_XDECREF(off);
    if (offset < 0 || offset > (1LL << 40)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_BufferError, "the tensor's storage offset cannot be described");
        goto done;
    }
    /* No memory: a stand-in address, never dereferenced (meta_only operands
     * never reach a data operation), aligned as the storage offset makes the
     * first element of a torch storage aligned, for the views' rules. */
    op->scratch = (DLTensor){
        .data = (void *)(uintptr_t)(4096 + (uint64_t)offset * itemsize_of(dt)), .device = {kDLExtDev, 0},
        .ndim = (int32_t)n, .dtype = dt,
        .shape = op->dims, .strides = op->dims + PYLAYOUT_MAX_NDIM, .byte_offset = 0,
    };
    op->dl = &op->scratch;
    op->meta_only = true;
    rc = 0;
done:
    Py_XDECREF(shape);
    Py_XDECREF(shape_t);
    Py_XDECREF(strides);
    Py_XDECREF(strides_t);
    Py_XDECREF(dtype);
    return rc;
}

/* Phase 2: the DLTensor to use from now on.  For a data operation
 * (for_data) no Python code runs here on success. */
static int operand_memory(operand *op, bool for_data)
{
    if (!op->late) {
        op->dl = ((TensorObject *)op->held)->dl;
        return 0;
    }
    if (op->late->dltensor_from_py_object_no_sync(op->obj, &op->scratch) == 0) {
        op->dl = &op->scratch;
        return 0;
    }
    if (!op->is_torch) {
        exchange_refused(op->obj);
        return -1;
    }
    if (!for_data) { /* a metadata query: meta tensors answer from their sizes and strides */
        PyErr_Clear();
        return torch_metadata(op);
    }
    return torch_refused(op->obj);
}

/* After a write into op's memory: torch's autograd must see it (rule 3). */
static int operand_written(core_state *state, operand *op)
{
    if (!op->is_torch)
        return 0;
    if (!state->increment_version) {
        PyObject *graph = PyImport_ImportModule("torch.autograd.graph");
        state->increment_version = graph ? PyObject_GetAttrString(graph, "increment_version") : NULL;
        Py_XDECREF(graph);
        if (!state->increment_version)
            return -1;
    }
    PyObject *r = PyObject_CallOneArg(state->increment_version, op->obj);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static void operand_release(operand *op)
{
    Py_CLEAR(op->held);
    op->dl = NULL;
}

/* Parses device=: None, "cpu", a (type, id) pair, or anything with
 * __dlpack_device__.  Returns 0 and sets *given = 0 for None. */
static int parse_device(PyObject *obj, DLDevice *dev, int *given)
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

/* ----------------------------------------------------------------- copies */

/* A new Tensor holding a copy of src laid out like src (pylayout_like_order:
 * the same strides if src is dense, so the copy is a memcpy).  Raises on
 * failure. */
static pylayout_tensor *copy_tensor(const DLTensor *src)
{
    pylayout_tensor *out = NULL;
    int32_t order[PYLAYOUT_MAX_NDIM];
    pylayout_status st = pylayout_like_order(src, order);
    if (st == PYLAYOUT_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = pylayout_convert_order(src, order, &out);
        Py_END_ALLOW_THREADS
    }
    if (st != PYLAYOUT_OK) {
        raise_status(st);
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------- Tensor.__dlpack__ */

static PyObject *Tensor_dlpack(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    TensorObject *self = (TensorObject *)op;
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (nargs > 0) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
        return NULL;
    }
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *val = args[i];
        if (!PyUnicode_CompareWithASCIIString(key, "stream"))
            stream = val;
        else if (!PyUnicode_CompareWithASCIIString(key, "max_version"))
            max_version = val;
        else if (!PyUnicode_CompareWithASCIIString(key, "dl_device"))
            dl_device = val;
        else if (!PyUnicode_CompareWithASCIIString(key, "copy"))
            copy = val;
        else {
            PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument %R", key);
            return NULL;
        }
    }
    const DLTensor *dl = self->dl;
    if (stream != Py_None && dl->device.device_type == kDLCPU) {
        PyErr_SetString(PyExc_ValueError, "stream must be None for CPU tensors");
        return NULL;
    }
    DLDevice want;
    int given;
    if (parse_device(dl_device, &want, &given) < 0)
        return NULL;
    if (given && (want.device_type != dl->device.device_type || want.device_id != dl->device.device_id)) {
        PyErr_Format(PyExc_BufferError,
                     "cannot export to device (%d, %d): the tensor lives on (%d, %d) and pylayout does not "
                     "move data between devices",
                     (int)want.device_type, (int)want.device_id, (int)dl->device.device_type,
                     (int)dl->device.device_id);
        return NULL;
    }
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned int major = 0, minor = 0;
        if (!PyTuple_Check(max_version) || !PyArg_ParseTuple(max_version, "II", &major, &minor)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "max_version must be a (major, minor) tuple, got %R", max_version);
            return NULL;
        }
        versioned = major >= 1;
    }
    int want_copy = 0;
    if (copy != Py_None) {
        want_copy = PyObject_IsTrue(copy);
        if (want_copy < 0)
            return NULL;
    }
    pylayout_tensor *t = self->tensor;
    pylayout_tensor_retain(t);
    if (want_copy) {
        release(t);
        t = copy_tensor(dl);
        if (!t)
            return NULL;
    }
    PyObject *capsule = NULL;
    pylayout_status st;
    if (versioned) {
        DLManagedTensorVersioned *m;
        st = pylayout_tensor_to_versioned(t, &m);
        if (st == PYLAYOUT_OK) {
            if (want_copy)
                m->flags |= PYLAYOUT_FLAG_IS_COPIED;
            capsule = PyCapsule_New(m, VERSIONED_NAME, versioned_capsule_destructor);
            if (!capsule)
                m->deleter(m);
        }
    } else {
        DLManagedTensor *m;
        st = pylayout_tensor_to_legacy(t, &m);
        if (st == PYLAYOUT_OK) {
            capsule = PyCapsule_New(m, LEGACY_NAME, legacy_capsule_destructor);
            if (!capsule)
                m->deleter(m);
        }
    }
    release(t);
    if (st != PYLAYOUT_OK) {
        if (st == PYLAYOUT_ERR_READ_ONLY)
            PyErr_SetString(PyExc_BufferError, pylayout_last_error());
        else
            raise_status(st);
        return NULL;
    }
    return capsule;
}

static PyObject *Tensor_dlpack_device(PyObject *op, PyObject *unused)
{
    (void)unused;
    return Tensor_get_device(op, NULL);
}

/* NumPy calls __array__ when the buffer protocol fails; without it,
 * np.asarray would silently build a 0-d object array. */
static PyObject *Tensor_array(PyObject *op, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None, *np = NULL, *arr = NULL, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    if (!is_host(dl->device)) {
        PyErr_Format(PyExc_BufferError,
                     "cannot make a NumPy array of a tensor on device type %d (not CPU memory); copy it to "
                     "the CPU with its own library first",
                     (int)dl->device.device_type);
        return NULL;
    }
    if (!buffer_format(dl->dtype)) {
        PyErr_Format(PyExc_BufferError, "NumPy has no %s dtype; use torch.from_dlpack or keep the pylayout.Tensor",
                     dtype_name_or(dl->dtype, "such"));
        return NULL;
    }
    np = PyImport_ImportModule("numpy");
    if (!np)
        return NULL;
    arr = PyObject_CallMethod(np, "from_dlpack", "O", op);
    if (!arr)
        goto done;
    if (dtype != Py_None) { /* astype(dtype, copy=...): copy is keyword-only in effect */
        PyObject *astype = PyObject_GetAttrString(arr, "astype");
        PyObject *kw = astype ? Py_BuildValue("{s:O}", "copy", copy == Py_True ? Py_True : Py_False) : NULL;
        PyObject *pos = kw ? PyTuple_Pack(1, dtype) : NULL;
        res = pos ? PyObject_Call(astype, pos, kw) : NULL;
        Py_XDECREF(pos);
        Py_XDECREF(kw);
        Py_XDECREF(astype);
    } else if (copy == Py_True) {
        res = PyObject_CallMethod(arr, "copy", NULL);
    } else {
        res = Py_NewRef(arr);
    }
done:
    Py_XDECREF(arr);
    Py_XDECREF(np);
    return res;
}

static PyMethodDef Tensor_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))Tensor_array, METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None)\n--\n\nA NumPy view of a CPU tensor (numpy.from_dlpack)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))Tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Export as a DLPack capsule (versioned when max_version >= (1, 0))."},
    {"__dlpack_device__", Tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(device_type, device_id) of the tensor's memory."},
    {NULL, NULL, 0, NULL},
};

static PyObject *Tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    PyErr_Format(PyExc_TypeError, "%s cannot be created directly; use pylayout.from_dlpack(x) or pylayout.empty()",
                 type->tp_name);
    return NULL;
}

static PyType_Slot Tensor_slots[] = {
    {Py_tp_dealloc, Tensor_dealloc},
    {Py_tp_repr, Tensor_repr},
    {Py_tp_getset, Tensor_getset},
    {Py_tp_methods, Tensor_methods},
    {Py_tp_new, Tensor_new},
    {Py_bf_getbuffer, Tensor_getbuffer},
    {Py_bf_releasebuffer, Tensor_releasebuffer},
    {Py_tp_doc, "A strided tensor exchanged through DLPack: a zero-copy view of a producer's memory.\n\n"
                "Create one with pylayout.from_dlpack(x).  It supports __dlpack__, the buffer protocol "
                "(CPU only) and the DLPack C exchange API."},
    {0, NULL},
};

static PyType_Spec Tensor_spec = {
    .name = "pylayout.Tensor",
    .basicsize = sizeof(TensorObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = Tensor_slots,
};

/* ------------------------------------------ DLPack C exchange API (ours) */

static core_state *find_state(void)
{
    PyObject *name = PyUnicode_FromString("pylayout._core");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    if (!mod) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "pylayout._core is not imported");
        return NULL;
    }
    core_state *state = get_state(mod);
    Py_DECREF(mod); /* sys.modules keeps it alive */
    return state;
}

static int api_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                         void (*set_error)(void *, const char *, const char *))
{
    pylayout_tensor *t;
    if (prototype->device.device_type != kDLCPU) {
        set_error(error_ctx, "BufferError", "pylayout allocates CPU tensors only");
        return -1;
    }
    pylayout_status st = pylayout_tensor_empty(prototype->ndim, prototype->shape, prototype->dtype,
                                               PYLAYOUT_FORMAT_CONTIGUOUS, &t);
    if (st == PYLAYOUT_OK) {
        st = pylayout_tensor_to_versioned(t, out);
        /* Not release(): the exchange API may call this without the GIL,
         * and t is ours alone (no producer deleter can run). */
        pylayout_tensor_release(t);
    }
    if (st != PYLAYOUT_OK) {
        set_error(error_ctx, st == PYLAYOUT_ERR_NO_MEMORY ? "MemoryError" : "ValueError", pylayout_last_error());
        return -1;
    }
    return 0;
}

static int api_from_py(void *py_object, DLManagedTensorVersioned **out)
{
    PyObject *obj = py_object;
    if (!is_our_tensor(obj)) {
        PyErr_Format(PyExc_TypeError, "expected a pylayout.Tensor, got %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    pylayout_status st = pylayout_tensor_to_versioned(((TensorObject *)obj)->tensor, out);
    return st == PYLAYOUT_OK ? 0 : (raise_status(st), -1);
}

static int api_to_py(DLManagedTensorVersioned *m, void **out)
{
    core_state *state = find_state();
    if (!state) { /* ownership was handed to us: the deleter runs on every failure */
        PyObject *exc = PyErr_GetRaisedException_compat(); /* a deleter may run Python */
        if (m && m->deleter)
            m->deleter(m);
        PyErr_SetRaisedException_compat(exc);
        return -1;
    }
    *out = wrap_managed(state, m);
    return *out ? 0 : -1;
}

static int api_dltensor_from_py(void *py_object, DLTensor *out)
{
    /* The API's contract says only objects of our own type come here, but a
     * class can copy the attribute: check, as api_from_py does. */
    if (!is_our_tensor(py_object)) {
        PyErr_Format(PyExc_TypeError, "expected a pylayout.Tensor, got %.200s", Py_TYPE((PyObject *)py_object)->tp_name);
        return -1;
    }
    *out = *((TensorObject *)py_object)->dl;
    return 0;
}

static int api_current_stream(DLDeviceType type, int32_t id, void **out)
{
    (void)type;
    (void)id;
    *out = NULL;
    return 0;
}

static const DLPackExchangeAPI exchange_api = {
    .header = {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    .managed_tensor_allocator = api_allocator,
    .managed_tensor_from_py_object_no_sync = api_from_py,
    .managed_tensor_to_py_object_no_sync = api_to_py,
    .dltensor_from_py_object_no_sync = api_dltensor_from_py,
    .current_work_stream = api_current_stream,
};

/* -------------------------------------------------------- module functions */

static PyObject *mod_from_dlpack(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "device", "copy", NULL};
    PyObject *x, *device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:from_dlpack", kwlist, &x, &device, &copy))
        return NULL;
    core_state *state = get_state(module);
    DLDevice want;
    int given, want_copy = 0;
    if (parse_device(device, &want, &given) < 0)
        return NULL;
    if (copy != Py_None && (want_copy = PyObject_IsTrue(copy)) < 0)
        return NULL;
    /* Only a producer reached through __dlpack__ sees copy=; it says it
     * copied by setting IS_COPIED.  Everything else is copied here. */
    bool producer_may_copy = !Py_IS_TYPE(x, state->TensorType) && !PyCapsule_CheckExact(x) &&
                             !exchange_api_of(state, Py_TYPE(x));
    if (PyErr_Occurred())
        return NULL;
    PyObject *res = import_tensor(state, x, copy);
    if (!res)
        return NULL;
    const DLTensor *dl = ((TensorObject *)res)->dl;
    if (given && (want.device_type != dl->device.device_type || want.device_id != dl->device.device_id)) {
        PyErr_Format(PyExc_BufferError,
                     "the tensor lives on device (%d, %d), not (%d, %d); pylayout does not move data between "
                     "devices",
                     (int)dl->device.device_type, (int)dl->device.device_id, (int)want.device_type,
                     (int)want.device_id);
        Py_DECREF(res);
        return NULL;
    }
    if (want_copy && !(producer_may_copy && (((TensorObject *)res)->flags & PYLAYOUT_FLAG_IS_COPIED))) {
        pylayout_tensor *c = copy_tensor(dl);
        Py_DECREF(res);
        return c ? wrap_tensor(state, c) : NULL;
    }
    return res;
}

/* The DLTensor of x for a metadata query, in op (release it after use). */
static const DLTensor *query_operand(core_state *state, PyObject *x, operand *op)
{
    if (operand_take(state, x, op) < 0 || operand_memory(op, false) < 0)
        return NULL;
    return op->dl;
}

static PyObject *mod_is_contiguous(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", "memory_format", NULL};
    PyObject *x, *fmt_obj = NULL, *mf_obj = NULL, *res = NULL;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$O:is_contiguous", kwlist, &x, &fmt_obj, &mf_obj))
        return NULL;
    if (parse_format_args(fmt_obj, mf_obj, &fmt, true) < 0)
        return NULL;
    operand op = {.held = NULL};
    bool result = false;
    const DLTensor *dl = query_operand(get_state(module), x, &op);
    if (dl) {
        pylayout_status st = fmt == FORMAT_PRESERVE ? pylayout_is_dense(dl, &result)
                                                    : pylayout_is_contiguous(dl, fmt, &result);
        res = st != PYLAYOUT_OK ? raise_status(st) : PyBool_FromLong(result);
    }
    operand_release(&op);
    return res;
}

/* A metadata query of x: `answer` computes the result from its DLTensor
 * (no memory is read, so Python may run afterwards). */
static PyObject *query(PyObject *module, PyObject *x, PyObject *(*answer)(const DLTensor *))
{
    operand op = {.held = NULL};
    const DLTensor *dl = query_operand(get_state(module), x, &op);
    PyObject *res = dl ? answer(dl) : NULL;
    operand_release(&op);
    return res;
}

static PyObject *suggest_format_of(const DLTensor *dl)
{
    pylayout_format fmt;
    pylayout_status st = pylayout_suggest_format(dl, &fmt);
    return st != PYLAYOUT_OK ? raise_status(st) : PyUnicode_FromString(format_name(fmt));
}

static PyObject *mod_suggest_format(PyObject *module, PyObject *x)
{
    return query(module, x, suggest_format_of);
}

static PyObject *is_dense_of(const DLTensor *dl)
{
    bool result = false;
    pylayout_status st = pylayout_is_dense(dl, &result);
    return st != PYLAYOUT_OK ? raise_status(st) : PyBool_FromLong(result);
}

static PyObject *mod_is_dense(PyObject *module, PyObject *x)
{
    return query(module, x, is_dense_of);
}

/* Reads a sequence of ints.  A snapshot (a tuple) is taken first: an item's
 * __index__ may run any Python code, including code that empties the
 * sequence it came from. */
static int parse_int64_seq(PyObject *seq, const char *what, int64_t *out, int32_t *n)
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

static PyObject *mod_empty(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"shape", "dtype", "format", "order", NULL};
    PyObject *shape_obj, *dtype_obj = NULL, *fmt_obj = NULL, *order_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OO:empty", kwlist, &shape_obj, &dtype_obj, &fmt_obj,
                                     &order_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM], order64[PYLAYOUT_MAX_NDIM];
    int32_t ndim, order_n, order[PYLAYOUT_MAX_NDIM];
    DLDataType dt = {kDLFloat, 32, 1};
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0)
        return NULL;
    if (dtype_obj && parse_dtype(dtype_obj, &dt) < 0)
        return NULL;
    if (fmt_obj == Py_None)
        fmt_obj = NULL;
    if (fmt_obj && parse_format(fmt_obj, &fmt) < 0)
        return NULL;
    pylayout_tensor *t;
    pylayout_status st;
    if (order_obj != Py_None) {
        if (fmt_obj) {
            PyErr_SetString(PyExc_ValueError, "give format or order, not both");
            return NULL;
        }
        if (parse_int64_seq(order_obj, "order must be a sequence of ints", order64, &order_n) < 0)
            return NULL;
        if (order_n != ndim) {
            PyErr_Format(PyExc_ValueError, "order has %d entries but shape has %d", (int)order_n, (int)ndim);
            return NULL;
        }
        for (int32_t i = 0; i < ndim; i++)
            order[i] = order64[i] < 0 || order64[i] >= ndim ? -1 : (int32_t)order64[i];
        st = pylayout_tensor_empty_order(ndim, shape, dt, order, &t);
    } else {
        st = pylayout_tensor_empty(ndim, shape, dt, fmt, &t);
    }
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return wrap_tensor(get_state(module), t);
}

/* Wraps a freshly allocated tensor (never one aliasing an input: rule 2) as
 * the kind of object `like` is: through the exchange API of type(like) when
 * it has one, else a pylayout.Tensor (the Python shim turns that into an
 * ndarray for NumPy input).  Steals t. */
static PyObject *export_like(core_state *state, PyObject *like, pylayout_tensor *t)
{
    const DLPackExchangeAPI *api = Py_IS_TYPE(like, state->TensorType) ? NULL : exchange_api_of(state, Py_TYPE(like));
    if (PyErr_Occurred()) {
        release(t);
        return NULL;
    }
    if (!api || !api->managed_tensor_to_py_object_no_sync)
        return wrap_tensor(state, t);
    DLManagedTensorVersioned *m;
    pylayout_status st = pylayout_tensor_to_versioned(t, &m);
    release(t);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    void *out = NULL;
    if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0)
        return NULL;
    return out;
}

static int check_host(const DLTensor *dl, const char *what)
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

/* The copying half of contiguous() and to_order(): x's metadata said a copy
 * is needed.  Guards x, reads its memory afresh (rule 1), fills a new tensor
 * dense in `order` (or `fmt` when order is NULL) with the GIL released, and
 * returns it as the kind of object x is.  `n_order` is the length the order
 * was checked against: the fresh read must still have that many dims. */
static PyObject *convert_like(core_state *state, operand *x, pylayout_format fmt, const int32_t *order,
                              int32_t n_order)
{
    pylayout_tensor *out = NULL;
    pylayout_status st;
    if (operand_guard(x) < 0 || operand_memory(x, true) < 0) /* phase 2 from here */
        return NULL;
    if (order && x->dl->ndim != n_order) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but the tensor has %d dims", (int)n_order,
                     (int)x->dl->ndim);
        return NULL;
    }
    if (check_host(x->dl, "the input") < 0)
        return NULL;
    const DLTensor *dl = x->dl;
    Py_BEGIN_ALLOW_THREADS
    st = order ? pylayout_convert_order(dl, order, &out) : pylayout_convert(dl, fmt, &out);
    Py_END_ALLOW_THREADS
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return export_like(state, x->obj, out); /* memory done: Python may run again */
}

/* A copy of x laid out like x (copy_tensor), for torch.preserve_format. */
static PyObject *copy_like(core_state *state, operand *x)
{
    if (operand_guard(x) < 0 || operand_memory(x, true) < 0 || check_host(x->dl, "the input") < 0)
        return NULL;
    pylayout_tensor *out = copy_tensor(x->dl);
    return out ? export_like(state, x->obj, out) : NULL;
}

static PyObject *mod_convert(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", "memory_format", "copy", NULL};
    PyObject *x_obj, *fmt_obj = NULL, *mf_obj = NULL, *copy = Py_None, *res = NULL;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    int want_copy;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OO:contiguous", kwlist, &x_obj, &fmt_obj, &mf_obj, &copy))
        return NULL;
    if (parse_format_args(fmt_obj, mf_obj, &fmt, true) < 0 || parse_copy(copy, &want_copy) < 0)
        return NULL;
    core_state *state = get_state(module);
    operand x = {.held = NULL};
    if (!query_operand(state, x_obj, &x))
        goto done;
    bool already = false; /* false for channels_last formats of the wrong rank */
    pylayout_status st = PYLAYOUT_OK;
    if (fmt == FORMAT_PRESERVE) { /* dense: kept as it is; else a copy in its stride order (copy_like) */
        st = pylayout_is_dense(x.dl, &already);
    } else {
        st = pylayout_is_contiguous(x.dl, fmt, &already);
    }
    if (st != PYLAYOUT_OK)
        raise_status(st);
    else if (already && want_copy != 1)
        res = Py_NewRef(x_obj);
    else if (!already && want_copy == 0)
        PyErr_Format(PyExc_ValueError, "copy=False, but the tensor is not %s: converting it needs a copy",
                     fmt == FORMAT_PRESERVE ? "dense" : format_name(fmt));
    else if (fmt == FORMAT_PRESERVE)
        res = copy_like(state, &x);
    else
        res = convert_like(state, &x, fmt, NULL, 0);
done:
    operand_release(&x);
    return res;
}

static PyObject *mod_to_order(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "order", "copy", NULL};
    PyObject *x_obj, *order_obj, *copy = Py_None, *res = NULL;
    int want_copy;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:to_order", kwlist, &x_obj, &order_obj, &copy) ||
        parse_copy(copy, &want_copy) < 0)
        return NULL;
    core_state *state = get_state(module);
    int64_t order64[PYLAYOUT_MAX_NDIM];
    int32_t order[PYLAYOUT_MAX_NDIM], n;
    if (parse_int64_seq(order_obj, "order must be a sequence of ints", order64, &n) < 0)
        return NULL;
    operand x = {.held = NULL};
    pylayout_status st;
    if (!query_operand(state, x_obj, &x))
        goto done;
    if (n != x.dl->ndim) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but the tensor has %d dims", (int)n, (int)x.dl->ndim);
        goto done;
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = order64[i] < 0 || order64[i] >= n ? -1 : (int32_t)order64[i];
    bool already = false;
    if ((st = pylayout_is_in_order(x.dl, order, &already)) != PYLAYOUT_OK) {
        raise_status(st);
        goto done;
    }
    if (already && want_copy != 1)
        res = Py_NewRef(x_obj);
    else if (!already && want_copy == 0)
        PyErr_SetString(PyExc_ValueError, "copy=False, but the tensor is not dense in that order: converting "
                                          "it needs a copy");
    else
        res = convert_like(state, &x, PYLAYOUT_FORMAT_CONTIGUOUS, order, n);
done:
    operand_release(&x);
    return res;
}

static PyObject *mod_copy_into(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dst", "src", NULL};
    PyObject *dst_obj, *src_obj, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:copy_into", kwlist, &dst_obj, &src_obj))
        return NULL;
    core_state *state = get_state(module);
    operand dst = {.held = NULL}, src = {.held = NULL};
    /* Phase 1: every operand's Python-level work, dst's included. */
    if (operand_take(state, dst_obj, &dst) < 0 || operand_take(state, src_obj, &src) < 0 ||
        operand_guard(&dst) < 0 || operand_guard(&src) < 0)
        goto done;
    /* Phase 2: the memory, read now and used before any Python runs. */
    if (operand_memory(&dst, true) < 0 || operand_memory(&src, true) < 0)
        goto done;
    if (dst.flags & PYLAYOUT_FLAG_READ_ONLY) {
        PyErr_SetString(PyExc_ValueError, "dst is read-only: its producer did not hand it over for writing");
        goto done;
    }
    if (check_host(dst.dl, "dst") < 0 || check_host(src.dl, "src") < 0)
        goto done;
    pylayout_status st;
    const DLTensor *s = src.dl;
    DLTensor *d = (DLTensor *)dst.dl;
    Py_BEGIN_ALLOW_THREADS
    st = pylayout_copy(s, d);
    Py_END_ALLOW_THREADS
    if (st != PYLAYOUT_OK) {
        raise_status(st);
        goto done;
    }
    if (operand_written(state, &dst) < 0)
        goto done;
    res = Py_NewRef(dst_obj);
done:
    operand_release(&src);
    operand_release(&dst);
    return res;
}

/* ---------------------------------------------------------------- complex */

/* Imports x for a zero-copy view, refusing torch tensors (rule 2): a view
 * rebuilt over torch's memory could not keep torch's storage alive, so
 * pylayout makes those with torch's own view ops (pylayout.torch). */
static PyObject *import_for_view(core_state *state, PyObject *x, const char *fn)
{
    producer_info info = {NULL, false};
    if (!Py_IS_TYPE(x, state->TensorType) && !PyCapsule_CheckExact(x) && producer_of(state, Py_TYPE(x), &info) < 0)
        return NULL;
    if (info.is_torch) {
        PyErr_Format(PyExc_TypeError,
                     "pylayout._core.%s makes no views of torch tensors (they would not keep torch's storage "
                     "alive); call pylayout.%s, which makes them with torch's view ops",
                     fn, fn);
        return NULL;
    }
    return import_tensor(state, x, Py_None);
}

static PyObject *mod_view_as_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "copy", NULL};
    PyObject *x, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:view_as_complex", kwlist, &x, &copy))
        return NULL;
    int want_copy = copy == Py_None ? -1 : PyObject_IsTrue(copy); /* -1: copy only if needed */
    if (copy != Py_None && want_copy < 0)
        return NULL;
    core_state *state = get_state(module);
    PyObject *in = import_for_view(state, x, "view_as_complex");
    if (!in)
        return NULL;
    pylayout_tensor *view = NULL, *packed = NULL;
    pylayout_status st = PYLAYOUT_ERR_NOT_VIEWABLE;
    if (want_copy != 1)
        st = pylayout_view_as_complex(((TensorObject *)in)->tensor, &view);
    if (st == PYLAYOUT_ERR_NOT_VIEWABLE && want_copy != 0) {
        /* Pack: a contiguous copy always admits the view. */
        const DLTensor *dl = ((TensorObject *)in)->dl;
        if (check_host(dl, "the input") < 0)
            goto done;
        Py_BEGIN_ALLOW_THREADS
        st = pylayout_convert(dl, PYLAYOUT_FORMAT_CONTIGUOUS, &packed);
        Py_END_ALLOW_THREADS
        if (st == PYLAYOUT_OK)
            st = pylayout_view_as_complex(packed, &view);
        release(packed);
    }
done:
    Py_DECREF(in);
    if (PyErr_Occurred())
        return NULL;
    if (st != PYLAYOUT_OK)
        return raise_operand_status(st);
    return wrap_tensor(state, view); /* the shim gives NumPy input a NumPy view */
}

/* Shared by view_as_real and canonicalize: a zero-copy view made by `fn`. */
static PyObject *zero_copy_view(PyObject *module, PyObject *x, const char *name,
                                pylayout_status (*fn)(pylayout_tensor *, pylayout_tensor **))
{
    core_state *state = get_state(module);
    PyObject *in = import_for_view(state, x, name);
    if (!in)
        return NULL;
    pylayout_tensor *view;
    pylayout_status st = fn(((TensorObject *)in)->tensor, &view);
    Py_DECREF(in);
    if (st != PYLAYOUT_OK)
        return raise_operand_status(st);
    return wrap_tensor(state, view);
}

static PyObject *mod_view_as_real(PyObject *module, PyObject *z)
{
    return zero_copy_view(module, z, "view_as_real", pylayout_view_as_real);
}

static PyObject *mod_canonicalize(PyObject *module, PyObject *x)
{
    return zero_copy_view(module, x, "canonicalize", pylayout_tensor_canonicalize);
}

static PyObject *mod_pack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"re", "im", "out", NULL};
    PyObject *re_obj, *im_obj, *out_obj = Py_None, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:pack_complex", kwlist, &re_obj, &im_obj, &out_obj))
        return NULL;
    core_state *state = get_state(module);
    operand re = {.held = NULL}, im = {.held = NULL}, out = {.held = NULL};
    bool has_out = out_obj != Py_None;
    pylayout_tensor *fresh = NULL;
    pylayout_status st;
    /* Phase 1: every operand's Python-level work. */
    if (operand_take(state, re_obj, &re) < 0 || operand_take(state, im_obj, &im) < 0 ||
        (has_out && operand_take(state, out_obj, &out) < 0) || operand_guard(&re) < 0 || operand_guard(&im) < 0 ||
        (has_out && operand_guard(&out) < 0))
        goto done;
    /* Phase 2: the memory. */
    if (operand_memory(&re, true) < 0 || operand_memory(&im, true) < 0 || (has_out && operand_memory(&out, true) < 0))
        goto done;
    const DLTensor *dre = re.dl, *dim = im.dl, *dout;
    if (!has_out) {
        DLDataType ct;
        if ((st = pylayout_complex_dtype(dre->dtype, &ct)) != PYLAYOUT_OK) {
            raise_operand_status(st); /* the core's message: which dtypes pair */
            goto done;
        }
        if (check_host(dre, "re") < 0)
            goto done;
        if ((st = pylayout_tensor_empty(dre->ndim, dre->shape, ct, PYLAYOUT_FORMAT_CONTIGUOUS, &fresh)) !=
            PYLAYOUT_OK) {
            raise_status(st);
            goto done;
        }
        pylayout_tensor_dltensor(fresh, &dout);
    } else {
        if (out.flags & PYLAYOUT_FLAG_READ_ONLY) {
            PyErr_SetString(PyExc_ValueError, "out is read-only: its producer did not hand it over for writing");
            goto done;
        }
        dout = out.dl;
    }
    Py_BEGIN_ALLOW_THREADS
    st = pylayout_pack_complex(dre, dim, (DLTensor *)dout);
    Py_END_ALLOW_THREADS
    if (st != PYLAYOUT_OK) {
        raise_operand_status(st);
        goto done;
    }
    /* Memory done: Python may run again. */
    if (has_out) {
        if (operand_written(state, &out) == 0)
            res = Py_NewRef(out_obj);
    } else {
        res = export_like(state, re_obj, fresh);
        fresh = NULL;
    }
done:
    release(fresh);
    operand_release(&out);
    operand_release(&im);
    operand_release(&re);
    return res;
}

static PyObject *mod_unpack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"z", "copy", NULL};
    PyObject *z_obj, *copy = Py_True, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:unpack_complex", kwlist, &z_obj, &copy))
        return NULL;
    int want_copy = PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    core_state *state = get_state(module);
    pylayout_tensor *re = NULL, *im = NULL;
    pylayout_status st;
    if (!want_copy) {
        PyObject *zin = import_for_view(state, z_obj, "unpack_complex");
        if (!zin)
            return NULL;
        st = pylayout_complex_parts(((TensorObject *)zin)->tensor, &re, &im);
        Py_DECREF(zin);
        if (st != PYLAYOUT_OK)
            return raise_operand_status(st);
        PyObject *a = wrap_tensor(state, re);
        PyObject *b = a ? wrap_tensor(state, im) : (release(im), NULL);
        return b ? Py_BuildValue("(NN)", a, b) : (Py_XDECREF(a), NULL);
    }
    operand z = {.held = NULL};
    if (operand_take(state, z_obj, &z) < 0 || operand_guard(&z) < 0 || operand_memory(&z, true) < 0)
        goto done; /* phase 2 from the last call on */
    const DLTensor *dz = z.dl;
    DLDataType rt;
    if ((st = pylayout_real_dtype(dz->dtype, &rt)) != PYLAYOUT_OK) {
        raise_operand_status(st);
        goto done;
    }
    if (check_host(dz, "z") < 0)
        goto done;
    st = pylayout_tensor_empty(dz->ndim, dz->shape, rt, PYLAYOUT_FORMAT_CONTIGUOUS, &re);
    if (st == PYLAYOUT_OK)
        st = pylayout_tensor_empty(dz->ndim, dz->shape, rt, PYLAYOUT_FORMAT_CONTIGUOUS, &im);
    if (st == PYLAYOUT_OK) {
        const DLTensor *dre, *dim;
        pylayout_tensor_dltensor(re, &dre);
        pylayout_tensor_dltensor(im, &dim);
        Py_BEGIN_ALLOW_THREADS
        st = pylayout_unpack_complex(dz, (DLTensor *)dre, (DLTensor *)dim);
        Py_END_ALLOW_THREADS
    }
    if (st != PYLAYOUT_OK) {
        raise_operand_status(st);
        goto done;
    }
    operand_release(&z); /* memory done */
    PyObject *a = export_like(state, z_obj, re);
    PyObject *b = a ? export_like(state, z_obj, im) : (release(im), NULL);
    re = im = NULL;
    if (b)
        res = Py_BuildValue("(NN)", a, b);
    else
        Py_XDECREF(a);
done:
    release(re);
    release(im);
    operand_release(&z);
    return res;
}

/* The real strides that view x as complex without moving memory (pylayout's
 * rule, for torch's view ops to apply: twice the complex view's strides,
 * then 1), or a str saying why no view exists.  Metadata only. */
static PyObject *complex_view_strides_of(const DLTensor *dl)
{
    PyObject *res = NULL;
    pylayout_tensor *t = NULL, *v = NULL;
    pylayout_status st = pylayout_tensor_borrow(dl, 0, &t);
    if (st == PYLAYOUT_OK)
        st = pylayout_view_as_complex(t, &v);
    if (st == PYLAYOUT_ERR_NOT_VIEWABLE) {
        res = PyUnicode_FromString(pylayout_last_error());
    } else if (st != PYLAYOUT_OK) {
        raise_operand_status(st);
    } else {
        const DLTensor *vd;
        int64_t strides[PYLAYOUT_MAX_NDIM];
        pylayout_tensor_dltensor(v, &vd);
        for (int32_t d = 0; d < vd->ndim; d++)
            strides[d] = 2 * vd->strides[d]; /* a complex stride fits int64 twice over: it came from one */
        strides[vd->ndim] = 1;
        res = int64_tuple(strides, vd->ndim + 1);
    }
    pylayout_tensor_release(v); /* borrowed memory: no deleter, no Python */
    pylayout_tensor_release(t);
    return res;
}

static PyObject *mod_complex_view_strides(PyObject *module, PyObject *x)
{
    return query(module, x, complex_view_strides_of);
}

/* The strides of x with its size-1 dims' strides canonical
 * (pylayout_canonical_strides).  Metadata only. */
static PyObject *canonical_strides_of(const DLTensor *dl)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    pylayout_status st = pylayout_canonical_strides(dl, strides);
    return st != PYLAYOUT_OK ? raise_status(st) : int64_tuple(strides, dl->ndim);
}

static PyObject *mod_canonical_strides(PyObject *module, PyObject *x)
{
    return query(module, x, canonical_strides_of);
}

/* The strides pylayout gives a dense tensor of `shape` in a format or a dim
 * order (pylayout_format_strides / pylayout_order_strides): what a
 * conversion would produce, for backends that move the bytes themselves
 * (torch on CUDA, meta). */
static PyObject *mod_format_strides(PyObject *module, PyObject *args, PyObject *kwds)
{
    (void)module;
    static char *kwlist[] = {"shape", "format", NULL};
    PyObject *shape_obj, *fmt_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:format_strides", kwlist, &shape_obj, &fmt_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    int32_t ndim;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0 ||
        (fmt_obj && parse_format(fmt_obj, &fmt) < 0))
        return NULL;
    pylayout_status st = pylayout_format_strides(ndim, shape, fmt, strides);
    return st != PYLAYOUT_OK ? raise_status(st) : int64_tuple(strides, ndim);
}

static PyObject *mod_order_strides(PyObject *module, PyObject *args, PyObject *kwds)
{
    (void)module;
    static char *kwlist[] = {"shape", "order", NULL};
    PyObject *shape_obj, *order_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:order_strides", kwlist, &shape_obj, &order_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM], order64[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    int32_t ndim, n, order[PYLAYOUT_MAX_NDIM];
    if (parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0 ||
        parse_int64_seq(order_obj, "order must be a sequence of ints", order64, &n) < 0)
        return NULL;
    if (n != ndim) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but shape has %d", (int)n, (int)ndim);
        return NULL;
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = order64[i] < 0 || order64[i] >= n ? -1 : (int32_t)order64[i];
    pylayout_status st = pylayout_order_strides(ndim, shape, order, strides);
    return st != PYLAYOUT_OK ? raise_status(st) : int64_tuple(strides, ndim);
}

static PyObject *mod_set_num_threads(PyObject *module, PyObject *arg)
{
    (void)module;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    int n = v < 0 ? 0 : v > 4096 ? 4096 : (int)v;
    bool warn = false; /* the C core says once per process; C users get it on stderr */
    int machine = 1;
    pylayout_status st = pylayout_set_num_threads_quiet(n, &warn, &machine);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    if (warn && PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                 "pylayout.set_num_threads(%ld) asks for more threads than this process can run at "
                                 "once here (%d: the CPUs in its affinity mask, at most OMP_THREAD_LIMIT); "
                                 "copies use %d",
                                 v, machine, machine) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Test hook: the threads the calling thread's last copy was entitled to. */
static PyObject *mod_last_copy_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int n = 0;
    pylayout_last_copy_threads(&n);
    return PyLong_FromLong(n);
}

static PyObject *mod_get_num_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int n = 1;
    pylayout_get_num_threads(&n);
    return PyLong_FromLong(n);
}

static PyObject *mod_set_cache_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    pylayout_status st = pylayout_set_cache_limit((int64_t)v);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *mod_cache_info(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int64_t limit = 0, held = 0;
    pylayout_cache_info(&limit, &held);
    return Py_BuildValue("{s:L,s:L}", "limit", (long long)limit, "held", (long long)held);
}

static PyObject *mod_build_info(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    bool openmp = false;
    const char *simd = "unknown";
    pylayout_build_info(&openmp, &simd);
    int n = 1;
    pylayout_get_num_threads(&n);
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:i}", "version", PYLAYOUT_VERSION_STRING, "dlpack_version",
                         Py_STRINGIFY(DLPACK_MAJOR_VERSION) "." Py_STRINGIFY(DLPACK_MINOR_VERSION), "openmp",
                         openmp ? Py_True : Py_False, "simd", simd, "num_threads", n);
}

static PyObject *mod_to_type(PyObject *module, PyObject *args)
{
    PyObject *tensor, *target;
    if (!PyArg_ParseTuple(args, "OO!:_to_type", &tensor, &PyType_Type, &target))
        return NULL;
    core_state *state = get_state(module);
    if (!Py_IS_TYPE(tensor, state->TensorType)) {
        PyErr_SetString(PyExc_TypeError, "expected a pylayout.Tensor");
        return NULL;
    }
    const DLPackExchangeAPI *api = exchange_api_of(state, (PyTypeObject *)target);
    if (!api) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    DLManagedTensorVersioned *m;
    pylayout_status st = pylayout_tensor_to_versioned(((TensorObject *)tensor)->tensor, &m);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    void *out = NULL;
    if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0)
        return NULL;
    return out;
}

/* Docstrings: a signature line for inspect.signature (__text_signature__),
 * then what the function does and a runnable example (doctest runs them). */
PyDoc_STRVAR(from_dlpack_doc,
"from_dlpack($module, /, x, *, device=None, copy=None)\n--\n\n"
"A zero-copy pylayout.Tensor over the memory of any DLPack producer.\n\n"
"`x` is a torch.Tensor, a numpy.ndarray, a pylayout.Tensor, any object with\n"
"__dlpack__, or a DLPack capsule.  Shape, strides (in elements), byte offset\n"
"and the read-only flag are kept.  device=None or the tensor's own device;\n"
"copy as in the Array API (None: copy only if needed, True: always).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> t = pl.from_dlpack(np.zeros((2, 3), np.float32).T)\n"
">>> t.shape, t.strides, t.dtype\n"
"((3, 2), (1, 3), 'float32')");

PyDoc_STRVAR(is_contiguous_doc,
"is_contiguous($module, /, x, format='contiguous', *, memory_format=None)\n--\n\n"
"Whether x is dense in `format`, with exactly torch's rules.\n\n"
"`format` (or torch's keyword memory_format) is 'contiguous' ('C'),\n"
"'channels_last' (4-D), 'channels_last_3d' (5-D), 'fortran' ('F'), a\n"
"torch.memory_format, or torch.preserve_format (then: dense in any order).\n"
"Metadata only: works on any device, meta tensors included.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> a = np.zeros((2, 3))\n"
">>> pl.is_contiguous(a), pl.is_contiguous(a.T), pl.is_contiguous(a.T, 'F')\n"
"(True, False, True)");

PyDoc_STRVAR(suggest_format_doc,
"suggest_format($module, x, /)\n--\n\n"
"The memory format torch's suggest_memory_format would name for x:\n"
"'contiguous', 'channels_last' or 'channels_last_3d'.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl.suggest_format(np.zeros((2, 4, 4, 3)).transpose(0, 3, 1, 2))\n"
"'channels_last'");

PyDoc_STRVAR(is_dense_doc,
"is_dense($module, x, /)\n--\n\n"
"Whether x's elements fill a block of memory with no gaps or overlaps, in\n"
"any dim order (size-1 dims aside).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> a = np.zeros((4, 6))\n"
">>> pl.is_dense(a.T), pl.is_dense(a[:, ::2])\n"
"(True, False)");

PyDoc_STRVAR(empty_doc,
"empty($module, /, shape, dtype='float32', *, format=None, order=None)\n--\n\n"
"A new uninitialised CPU pylayout.Tensor, dense in `format` or in the dim\n"
"`order` (outermost first).  dtype is a name, a torch or NumPy dtype, or a\n"
"NumPy scalar type such as numpy.float32.\n\n"
">>> import pylayout as pl\n"
">>> pl.empty((2, 3, 4, 5), 'float16', format='channels_last').strides\n"
"(60, 1, 15, 3)\n"
">>> pl.empty((2, 3), order=(1, 0)).strides\n"
"(1, 2)");

PyDoc_STRVAR(contiguous_doc,
"contiguous($module, /, x, format='contiguous', *, memory_format=None, copy=None)\n--\n\n"
"The C half of pylayout.contiguous (which see): x itself when already in\n"
"`format`, else a converted copy of the same kind.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.contiguous(pl.from_dlpack(np.zeros((2, 3)).T)).strides\n"
"(2, 1)");

PyDoc_STRVAR(to_order_doc,
"to_order($module, /, x, order, *, copy=None)\n--\n\n"
"The C half of pylayout.to_order (which see).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.to_order(pl.from_dlpack(np.zeros((2, 3))), (1, 0)).strides\n"
"(1, 2)");

PyDoc_STRVAR(copy_into_doc,
"copy_into($module, /, dst, src)\n--\n\n"
"The C half of pylayout.copy_into (which see): copies src into dst, same\n"
"shape and dtype, any strides; returns dst.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> out = np.zeros((2, 2))\n"
">>> pl._core.copy_into(out, np.eye(2)) is out\n"
"True");

PyDoc_STRVAR(view_as_complex_doc,
"view_as_complex($module, /, x, *, copy=None)\n--\n\n"
"The C half of pylayout.view_as_complex (which see), for non-torch input;\n"
"returns a pylayout.Tensor.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.view_as_complex(np.zeros((3, 2), np.float32)).dtype\n"
"'complex64'");

PyDoc_STRVAR(view_as_real_doc,
"view_as_real($module, z, /)\n--\n\n"
"The C half of pylayout.view_as_real (which see), for non-torch input.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.view_as_real(np.zeros(3, np.complex64)).shape\n"
"(3, 2)");

PyDoc_STRVAR(canonicalize_doc,
"canonicalize($module, x, /)\n--\n\n"
"The C half of pylayout.canonicalize (which see), for non-torch input.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.canonicalize(np.zeros((4, 2, 1), np.float32).transpose(0, 2, 1)).strides\n"
"(2, 2, 1)");

PyDoc_STRVAR(pack_complex_doc,
"pack_complex($module, /, re, im, *, out=None)\n--\n\n"
"The C half of pylayout.pack_complex (which see).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.pack_complex(np.ones(2), np.zeros(2)).dtype\n"
"'complex128'");

PyDoc_STRVAR(unpack_complex_doc,
"unpack_complex($module, /, z, *, copy=True)\n--\n\n"
"The C half of pylayout.unpack_complex (which see).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> [t.strides for t in pl._core.unpack_complex(np.zeros(3, np.complex64), copy=False)]\n"
"[(2,), (2,)]");

PyDoc_STRVAR(set_num_threads_doc,
"set_num_threads($module, n, /)\n--\n\n"
"Sets the number of threads pylayout's copies use, for the whole process\n"
"(n >= 1; 0 or less restores the default).\n\n"
">>> import pylayout as pl\n"
">>> n = pl.get_num_threads(); pl.set_num_threads(1); pl.get_num_threads()\n"
"1\n"
">>> pl.set_num_threads(n)");

PyDoc_STRVAR(get_num_threads_doc,
"get_num_threads($module, /)\n--\n\n"
"The number of threads pylayout's copies use (1 without OpenMP).\n\n"
">>> import pylayout as pl\n"
">>> pl.get_num_threads() >= 1\n"
"True");

PyDoc_STRVAR(last_copy_threads_doc,
"_last_copy_threads($module, /)\n--\n\n"
"The number of threads the calling thread's last copy was entitled to: a\n"
"test hook for the thread-count rules (docs/reliability.md), never a timing.");

PyDoc_STRVAR(set_cache_limit_doc,
"set_cache_limit($module, nbytes, /)\n--\n\n"
"Caps the bytes of released large outputs (>= 32 MiB) kept for reuse,\n"
"lazily freed so the kernel reclaims them under memory pressure; 0 releases\n"
"them now and turns the cache off.  Default: $PYLAYOUT_CACHE_LIMIT, else an\n"
"eighth of the least of physical memory (at least 1 GiB), the cgroup's\n"
"memory limit and the room RLIMIT_AS leaves, re-read when it matters.\n\n"
">>> import pylayout as pl\n"
">>> old = pl.cache_info()['limit']; pl.set_cache_limit(0); pl.cache_info()['held']\n"
"0\n"
">>> pl.set_cache_limit(old)");

PyDoc_STRVAR(cache_info_doc,
"cache_info($module, /)\n--\n\n"
"{'limit': bytes, 'held': bytes} of the output reuse cache.\n\n"
">>> import pylayout as pl\n"
">>> sorted(pl.cache_info())\n"
"['held', 'limit']");

PyDoc_STRVAR(build_info_doc,
"build_info($module, /)\n--\n\n"
"Facts about this build: version, DLPack version, OpenMP, the SIMD path\n"
"chosen at run time, the thread count.\n\n"
">>> import pylayout as pl\n"
">>> sorted(pl._core.build_info())[:3]\n"
"['dlpack_version', 'num_threads', 'openmp']");

PyDoc_STRVAR(to_type_doc,
"_to_type($module, tensor, target, /)\n--\n\n"
"tensor (a pylayout.Tensor) as an object of type `target` through that\n"
"type's DLPack C exchange API, or None if it has none.  For the benchmark.");

PyDoc_STRVAR(complex_view_strides_doc,
"complex_view_strides($module, x, /)\n--\n\n"
"The real strides under which x (..., 2) views as complex without moving\n"
"memory (twice the complex strides, then 1), or a str saying why no view\n"
"exists.  The rule pylayout.view_as_complex applies; metadata only.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.complex_view_strides(np.zeros((4, 1, 2), np.float32).transpose(1, 0, 2))\n"
"(2, 2, 1)");

PyDoc_STRVAR(canonical_strides_doc,
"canonical_strides($module, x, /)\n--\n\n"
"x's strides with each size-1 dim's stride canonical (pylayout.canonicalize).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.canonical_strides(np.zeros((4, 2, 1), np.float32).transpose(0, 2, 1))\n"
"(2, 2, 1)");

PyDoc_STRVAR(format_strides_doc,
"format_strides($module, /, shape, format='contiguous')\n--\n\n"
"The element strides of a dense tensor of `shape` in `format` (what\n"
"pylayout.contiguous(x, format) gives x of that shape).\n\n"
">>> import pylayout as pl\n"
">>> pl._core.format_strides((2, 3, 4, 5), 'channels_last')\n"
"(60, 1, 15, 3)");

PyDoc_STRVAR(order_strides_doc,
"order_strides($module, /, shape, order)\n--\n\n"
"The element strides of a dense tensor of `shape` whose dims are laid out\n"
"in `order`, outermost first (what pylayout.to_order gives).\n\n"
">>> import pylayout as pl\n"
">>> pl._core.order_strides((2, 3, 4), (2, 0, 1))\n"
"(3, 1, 6)");

#define KW_METHOD(name, fn) {#name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, name##_doc}

static PyMethodDef module_methods[] = {
    KW_METHOD(from_dlpack, mod_from_dlpack),
    KW_METHOD(is_contiguous, mod_is_contiguous),
    {"suggest_format", mod_suggest_format, METH_O, suggest_format_doc},
    {"is_dense", mod_is_dense, METH_O, is_dense_doc},
    KW_METHOD(empty, mod_empty),
    KW_METHOD(contiguous, mod_convert),
    KW_METHOD(to_order, mod_to_order),
    KW_METHOD(copy_into, mod_copy_into),
    KW_METHOD(view_as_complex, mod_view_as_complex),
    {"view_as_real", mod_view_as_real, METH_O, view_as_real_doc},
    {"canonicalize", mod_canonicalize, METH_O, canonicalize_doc},
    KW_METHOD(pack_complex, mod_pack_complex),
    KW_METHOD(unpack_complex, mod_unpack_complex),
    {"complex_view_strides", mod_complex_view_strides, METH_O, complex_view_strides_doc},
    {"canonical_strides", mod_canonical_strides, METH_O, canonical_strides_doc},
    KW_METHOD(format_strides, mod_format_strides),
    KW_METHOD(order_strides, mod_order_strides),
    {"set_num_threads", mod_set_num_threads, METH_O, set_num_threads_doc},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS, get_num_threads_doc},
    {"_last_copy_threads", mod_last_copy_threads, METH_NOARGS, last_copy_threads_doc},
    {"set_cache_limit", mod_set_cache_limit, METH_O, set_cache_limit_doc},
    {"cache_info", mod_cache_info, METH_NOARGS, cache_info_doc},
    {"build_info", mod_build_info, METH_NOARGS, build_info_doc},
    {"_to_type", mod_to_type, METH_VARARGS, to_type_doc},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ module init */

static int module_exec(PyObject *module)
{
    core_state *state = get_state(module);
    state->TensorType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Tensor_spec, NULL);
    if (!state->TensorType || PyModule_AddType(module, state->TensorType) < 0)
        return -1;
    PyObject *api = PyCapsule_New((void *)&exchange_api, EXCHANGE_NAME, NULL);
    if (!api || PyObject_SetAttrString((PyObject *)state->TensorType, "__dlpack_c_exchange_api__", api) < 0) {
        Py_XDECREF(api);
        return -1;
    }
    Py_DECREF(api);
    state->str_dlpack = PyUnicode_InternFromString("__dlpack__");
    state->str_exchange = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    state->kw_max_version = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
    if (!state->str_dlpack || !state->str_exchange || !state->kw_max_version)
        return -1;
    if (PyModule_AddStringConstant(module, "__version__", PYLAYOUT_VERSION_STRING) < 0 ||
        PyModule_AddObjectRef(module, "DLPACK_VERSION", api = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION,
                                                                             DLPACK_MINOR_VERSION)) < 0) {
        Py_XDECREF(api);
        return -1;
    }
    Py_DECREF(api);
    return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    core_state *state = get_state(module);
    Py_VISIT(state->TensorType);
    Py_VISIT(state->increment_version);
    return 0;
}

static int module_clear(PyObject *module)
{
    core_state *state = get_state(module);
    Py_CLEAR(state->TensorType);
    Py_CLEAR(state->increment_version);
    Py_CLEAR(state->str_dlpack);
    Py_CLEAR(state->str_exchange);
    Py_CLEAR(state->kw_max_version);
    return 0;
}

static void module_free(void *module)
{
    module_clear(module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pylayout._core",
    .m_doc = "pylayout's C core: DLPack exchange, layout queries and copies.",
    .m_size = sizeof(core_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&core_module);
}
