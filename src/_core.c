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

#include "internal.h" /* the core is compiled into the extension */

/* ------------------------------------------------------------------ state */

typedef struct {
    PyTypeObject *TensorType;
    PyObject *exchange_cache; /* dict: type -> capsule of its exchange API, or None */
    PyObject *str_dlpack;     /* "__dlpack__" */
    PyObject *str_exchange;   /* "__dlpack_c_exchange_api__" */
    PyObject *kw_max_version; /* {"max_version": (1, 0)} */
} core_state;

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
    default:
        type = PyExc_ValueError;
        break;
    }
    const char *detail = pylayout_last_error();
    PyErr_SetString(type, detail[0] ? detail : pylayout_strerror(st));
    return NULL;
}

static const char *const format_names[] = {"contiguous", "channels_last", "channels_last_3d", "fortran"};

/* Accepts a format name, torch's memory_format objects (by their str(), so
 * torch need not be imported) and NumPy's "C" / "F". */
static int parse_format(PyObject *obj, pylayout_format *fmt)
{
    PyObject *s = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
    if (!s)
        return -1;
    const char *name = PyUnicode_AsUTF8(s);
    int rc = -1;
    if (!name)
        goto done;
    if (!strncmp(name, "torch.", 6)) {
        name += 6;
        if (!strcmp(name, "contiguous_format"))
            name = "contiguous";
    }
    if (!strcmp(name, "C"))
        name = "contiguous";
    else if (!strcmp(name, "F"))
        name = "fortran";
    for (int i = 0; i < 4; i++) {
        if (!strcmp(name, format_names[i])) {
            *fmt = (pylayout_format)i;
            rc = 0;
            goto done;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "unknown memory format %R; use 'contiguous', 'channels_last', 'channels_last_3d', "
                 "'fortran' or a torch.memory_format",
                 obj);
done:
    Py_DECREF(s);
    return rc;
}

static const char *dtype_name_or(DLDataType dt, const char *fallback)
{
    const char *name = _pylayout_dtype_name(dt);
    return name ? name : fallback;
}

/* Accepts a dtype name ("float32") or anything whose str() is one, such as
 * torch.float32 or numpy.dtype('float32'). */
static int parse_dtype(PyObject *obj, DLDataType *dt)
{
    PyObject *s = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
    if (!s)
        return -1;
    const char *name = PyUnicode_AsUTF8(s);
    int rc = -1;
    if (name) {
        if (!strncmp(name, "torch.", 6))
            name += 6;
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
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    pylayout_tensor_release(t);
    PyErr_Restore(type, value, tb);
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

static PyObject *Tensor_get_ndim(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromLong(((TensorObject *)op)->dl->ndim);
}

static PyObject *Tensor_get_itemsize(PyObject *op, void *c)
{
    (void)c;
    return PyLong_FromSize_t(_pylayout_itemsize(((TensorObject *)op)->dl->dtype));
}

static PyObject *Tensor_get_nbytes(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    return PyLong_FromLongLong(numel_of(dl) * (int64_t)_pylayout_itemsize(dl->dtype));
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
    if (!_pylayout_device_is_host(dl->device)) {
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
    Py_ssize_t itemsize = (Py_ssize_t)_pylayout_itemsize(dl->dtype);
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)(dl->ndim ? dl->ndim : 1));
    if (!dims) {
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t d = 0; d < dl->ndim; d++) {
        dims[d] = (Py_ssize_t)dl->shape[d];
        dims[dl->ndim + d] = (Py_ssize_t)(dl->strides[d] * itemsize);
    }
    int64_t n = numel_of(dl);
    view->buf = n ? (char *)dl->data + dl->byte_offset : (void *)zero_size_buffer;
    view->obj = Py_NewRef(op);
    view->len = (Py_ssize_t)(n * itemsize);
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
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
    if (m && m->deleter)
        m->deleter(m);
    PyErr_Restore(type, value, tb);
}

static void legacy_capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, LEGACY_NAME))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
    if (m && m->deleter)
        m->deleter(m);
    PyErr_Restore(type, value, tb);
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

/* What pylayout knows about a producer type: its DLPack C exchange API (or
 * NULL) and whether it is a torch.Tensor type, whose exchange API exports
 * tensors that torch's own __dlpack__ refuses (see torch_guard). */
typedef struct {
    const DLPackExchangeAPI *api;
    bool is_torch;
} producer_info;

/* Looks up type(x) once and caches the answer in module state: a tuple
 * (capsule or None, is_torch).  Returns -1 with an exception set on error. */
static int producer_of(core_state *state, PyTypeObject *tp, producer_info *info)
{
    PyObject *entry = PyDict_GetItemWithError(state->exchange_cache, (PyObject *)tp);
    if (!entry) {
        if (PyErr_Occurred())
            return -1;
        PyObject *cap = Py_None;
        bool is_torch = false, found = false;
        /* Walk the MRO's dicts: no AttributeError to build and throw away. */
        PyObject *mro = tp->tp_mro;
        for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
            PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
            if (!strcmp(base->tp_name, "torch._C.TensorBase"))
                is_torch = true;
            PyObject *v = (!found && base->tp_dict) ? PyDict_GetItemWithError(base->tp_dict, state->str_exchange)
                                                    : NULL;
            if (v) {
                found = true;
                if (PyCapsule_IsValid(v, EXCHANGE_NAME)) {
                    const DLPackExchangeAPI *api = PyCapsule_GetPointer(v, EXCHANGE_NAME);
                    if (api && api->header.version.major == DLPACK_MAJOR_VERSION)
                        cap = v;
                }
            } else if (PyErr_Occurred()) {
                return -1;
            }
        }
        entry = Py_BuildValue("(OO)", cap, is_torch ? Py_True : Py_False);
        if (!entry || PyDict_SetItem(state->exchange_cache, (PyObject *)tp, entry) < 0) {
            Py_XDECREF(entry);
            return -1;
        }
        Py_DECREF(entry); /* the dict holds it */
    }
    PyObject *cap = PyTuple_GET_ITEM(entry, 0);
    info->api = cap == Py_None ? NULL : PyCapsule_GetPointer(cap, EXCHANGE_NAME);
    info->is_torch = PyTuple_GET_ITEM(entry, 1) == Py_True;
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
 * round trip would silently cut).  Refuse them the same way, with the fix. */
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
 * turn anything else (torch raises RuntimeError for sparse tensors) into the
 * BufferError DLPack consumers expect, keeping the producer's message. */
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

/* Calls x.__dlpack__(max_version=(1, 0), ...), retrying without keywords for
 * producers that predate them. */
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
    PyObject *kw = state->kw_max_version, *res;
    if (copy != Py_None) {
        kw = PyDict_Copy(state->kw_max_version);
        if (!kw || PyDict_SetItemString(kw, "copy", copy) < 0) {
            Py_XDECREF(kw);
            Py_DECREF(meth);
            return NULL;
        }
    } else {
        Py_INCREF(kw);
    }
    PyObject *empty = PyTuple_New(0);
    res = empty ? PyObject_Call(meth, empty, kw) : NULL;
    if (!res && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear(); /* a legacy producer: no keywords */
        res = PyObject_CallNoArgs(meth);
    }
    Py_XDECREF(empty);
    Py_DECREF(kw);
    Py_DECREF(meth);
    return res;
}

/* Imports any DLPack producer into a new reference to a Tensor. */
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
            return exchange_refused(x);
        pylayout_tensor *t;
        pylayout_status st = pylayout_tensor_from_versioned(m, &t);
        if (st != PYLAYOUT_OK) {
            if (m->deleter)
                m->deleter(m);
            return raise_status(st);
        }
        return wrap_tensor(state, t);
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

/* Runs torch_guard if x is a torch tensor: before pylayout reads or writes
 * its elements. */
static int data_guard(core_state *state, PyObject *x)
{
    producer_info info;
    if (Py_IS_TYPE(x, state->TensorType) || PyCapsule_CheckExact(x))
        return 0;
    if (producer_of(state, Py_TYPE(x), &info) < 0)
        return -1;
    return info.is_torch ? torch_guard(x) : 0;
}

/* A DLTensor describing x, borrowed without taking ownership: for a
 * metadata query, or (for_data) for reading its elements during this call.
 * *keep (maybe NULL) must be released after use. */
static const DLTensor *peek_dltensor(core_state *state, PyObject *x, bool for_data, DLTensor *scratch,
                                     PyObject **keep)
{
    *keep = NULL;
    if (Py_IS_TYPE(x, state->TensorType))
        return ((TensorObject *)x)->dl;
    if (!PyCapsule_CheckExact(x)) {
        producer_info info;
        if (producer_of(state, Py_TYPE(x), &info) < 0)
            return NULL;
        if (info.api && info.api->dltensor_from_py_object_no_sync) {
            if (for_data && info.is_torch && torch_guard(x) < 0)
                return NULL;
            if (info.api->dltensor_from_py_object_no_sync(x, scratch) != 0)
                return exchange_refused(x);
            return scratch;
        }
    }
    PyObject *t = import_tensor(state, x, Py_None);
    if (!t)
        return NULL;
    *keep = t;
    return ((TensorObject *)t)->dl;
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

/* A new Tensor holding a copy of src: same strides if src is dense (so the
 * copy is a memcpy), contiguous otherwise.  Flags IS_COPIED. */
static pylayout_tensor *copy_tensor(const DLTensor *src)
{
    pylayout_tensor *out = NULL;
    pylayout_status st;
    bool dense = false;
    pylayout_is_dense(src, &dense);
    Py_BEGIN_ALLOW_THREADS
    if (dense && src->ndim > 0) {
        /* Order dims by decreasing stride: the copy keeps src's layout. */
        int32_t order[PYLAYOUT_MAX_NDIM];
        for (int32_t i = 0; i < src->ndim; i++)
            order[i] = i;
        for (int32_t i = 1; i < src->ndim; i++)
            for (int32_t j = i; j > 0 && src->strides[order[j - 1]] < src->strides[order[j]]; j--) {
                int32_t tmp = order[j];
                order[j] = order[j - 1];
                order[j - 1] = tmp;
            }
        st = pylayout_convert_order(src, order, &out);
    } else {
        st = pylayout_convert(src, PYLAYOUT_FORMAT_CONTIGUOUS, &out);
    }
    Py_END_ALLOW_THREADS
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
    if (!_pylayout_device_is_host(dl->device)) {
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
    core_state *state = find_state();
    if (!state)
        return -1;
    if (!PyObject_TypeCheck(obj, state->TensorType)) {
        PyErr_Format(PyExc_TypeError, "expected a pylayout.Tensor, got %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    pylayout_status st = pylayout_tensor_to_versioned(((TensorObject *)obj)->tensor, out);
    return st == PYLAYOUT_OK ? 0 : (raise_status(st), -1);
}

static int api_to_py(DLManagedTensorVersioned *m, void **out)
{
    core_state *state = find_state();
    pylayout_tensor *t;
    if (!state)
        return -1;
    pylayout_status st = pylayout_tensor_from_versioned(m, &t);
    if (st != PYLAYOUT_OK) {
        if (m->deleter)
            m->deleter(m);
        raise_status(st);
        return -1;
    }
    *out = wrap_tensor(state, t);
    return *out ? 0 : -1;
}

static int api_dltensor_from_py(void *py_object, DLTensor *out)
{
    /* Only ever called with objects of our own type (the API's contract). */
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

static PyObject *mod_is_contiguous(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", NULL};
    PyObject *x, *fmt_obj = NULL, *keep;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:is_contiguous", kwlist, &x, &fmt_obj))
        return NULL;
    if (fmt_obj && parse_format(fmt_obj, &fmt) < 0)
        return NULL;
    DLTensor scratch;
    const DLTensor *dl = peek_dltensor(get_state(module), x, false, &scratch, &keep);
    if (!dl)
        return NULL;
    bool result = false;
    pylayout_status st = pylayout_is_contiguous(dl, fmt, &result);
    Py_XDECREF(keep);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return PyBool_FromLong(result);
}

static PyObject *mod_suggest_format(PyObject *module, PyObject *x)
{
    PyObject *keep;
    DLTensor scratch;
    const DLTensor *dl = peek_dltensor(get_state(module), x, false, &scratch, &keep);
    if (!dl)
        return NULL;
    pylayout_format fmt;
    pylayout_status st = pylayout_suggest_format(dl, &fmt);
    Py_XDECREF(keep);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return PyUnicode_FromString(format_names[fmt]);
}

static PyObject *mod_is_dense(PyObject *module, PyObject *x)
{
    PyObject *keep;
    DLTensor scratch;
    const DLTensor *dl = peek_dltensor(get_state(module), x, false, &scratch, &keep);
    if (!dl)
        return NULL;
    bool result = false;
    pylayout_status st = pylayout_is_dense(dl, &result);
    Py_XDECREF(keep);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return PyBool_FromLong(result);
}

static int parse_int64_seq(PyObject *seq, const char *what, int64_t *out, int32_t *n)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > PYLAYOUT_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries; pylayout supports at most %d dims", what, len,
                     PYLAYOUT_MAX_NDIM);
        Py_DECREF(fast);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    *n = (int32_t)len;
    Py_DECREF(fast);
    return 0;
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

/* Wraps a freshly converted tensor as the kind of object `like` is: through
 * the exchange API of type(like) when it has one, else a pylayout.Tensor
 * (the Python shim turns that into an ndarray for NumPy input). */
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
    if (_pylayout_device_is_host(dl->device))
        return 0;
    PyErr_Format(PyExc_BufferError,
                 "%s lives on device type %d (not CPU memory); pylayout has no backend for that device yet, "
                 "so only metadata operations (layout queries, zero-copy views) work there",
                 what, (int)dl->device.device_type);
    return -1;
}

/* The copying half of contiguous() and to_order(): a new tensor dense in
 * `order` (or in `fmt` when order is NULL), filled with the GIL released and
 * returned as the kind of object x is.  Releases `keep`. */
static PyObject *convert_like(core_state *state, PyObject *x, const DLTensor *dl, PyObject *keep,
                              pylayout_format fmt, const int32_t *order)
{
    pylayout_tensor *out = NULL;
    pylayout_status st;
    if (data_guard(state, x) < 0 || check_host(dl, "the input") < 0) {
        Py_XDECREF(keep);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = order ? pylayout_convert_order(dl, order, &out) : pylayout_convert(dl, fmt, &out);
    Py_END_ALLOW_THREADS
    Py_XDECREF(keep);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return export_like(state, x, out);
}

static PyObject *mod_convert(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", NULL};
    PyObject *x, *fmt_obj = NULL, *keep;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:contiguous", kwlist, &x, &fmt_obj))
        return NULL;
    if (fmt_obj && parse_format(fmt_obj, &fmt) < 0)
        return NULL;
    core_state *state = get_state(module);
    DLTensor scratch;
    const DLTensor *dl = peek_dltensor(state, x, false, &scratch, &keep);
    if (!dl)
        return NULL;
    bool already = false; /* false for channels_last formats of the wrong rank */
    pylayout_status st = pylayout_is_contiguous(dl, fmt, &already);
    if (st != PYLAYOUT_OK || already) {
        Py_XDECREF(keep);
        return st != PYLAYOUT_OK ? raise_status(st) : Py_NewRef(x);
    }
    return convert_like(state, x, dl, keep, fmt, NULL);
}

static PyObject *mod_to_order(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "order", NULL};
    PyObject *x, *order_obj, *keep;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:to_order", kwlist, &x, &order_obj))
        return NULL;
    core_state *state = get_state(module);
    int64_t order64[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    int32_t order[PYLAYOUT_MAX_NDIM], n;
    if (parse_int64_seq(order_obj, "order must be a sequence of ints", order64, &n) < 0)
        return NULL;
    DLTensor scratch;
    const DLTensor *dl = peek_dltensor(state, x, false, &scratch, &keep);
    if (!dl)
        return NULL;
    pylayout_status st = PYLAYOUT_OK;
    if (n != dl->ndim) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but the tensor has %d dims", (int)n, (int)dl->ndim);
        Py_XDECREF(keep); /* after the message: dl may live in keep */
        return NULL;
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = order64[i] < 0 || order64[i] >= n ? -1 : (int32_t)order64[i];
    if ((st = pylayout_order_strides(n, dl->shape, order, strides)) != PYLAYOUT_OK) {
        Py_XDECREF(keep);
        return raise_status(st);
    }
    /* Already dense in that order (size-1 dims aside, as torch ignores them)?
     * An exchange-API tensor may leave strides NULL (compact row-major). */
    int64_t have[PYLAYOUT_MAX_NDIM];
    if ((st = _pylayout_check(dl, "x", have)) != PYLAYOUT_OK) {
        Py_XDECREF(keep);
        return raise_status(st);
    }
    bool already = true;
    if (numel_of(dl) > 0)
        for (int32_t d = 0; d < n; d++)
            if (dl->shape[d] != 1 && have[d] != strides[d])
                already = false;
    if (already) {
        Py_XDECREF(keep);
        return Py_NewRef(x);
    }
    return convert_like(state, x, dl, keep, PYLAYOUT_FORMAT_CONTIGUOUS, order);
}

static PyObject *mod_copy_into(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dst", "src", NULL};
    PyObject *dst_obj, *src_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:copy_into", kwlist, &dst_obj, &src_obj))
        return NULL;
    core_state *state = get_state(module);
    /* dst is imported for real: its flags say whether we may write. */
    PyObject *dst = import_tensor(state, dst_obj, Py_None);
    if (!dst)
        return NULL;
    PyObject *keep = NULL;
    DLTensor scratch;
    const DLTensor *src = peek_dltensor(state, src_obj, true, &scratch, &keep);
    PyObject *res = NULL;
    if (!src)
        goto done;
    TensorObject *d = (TensorObject *)dst;
    if (d->flags & PYLAYOUT_FLAG_READ_ONLY) {
        PyErr_SetString(PyExc_ValueError, "dst is read-only: its producer did not hand it over for writing");
        goto done;
    }
    if (check_host(d->dl, "dst") < 0 || check_host(src, "src") < 0)
        goto done;
    pylayout_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pylayout_copy(src, (DLTensor *)d->dl);
    Py_END_ALLOW_THREADS
    if (st != PYLAYOUT_OK) {
        raise_status(st);
        goto done;
    }
    res = Py_NewRef(dst_obj);
done:
    Py_XDECREF(keep);
    Py_DECREF(dst);
    return res;
}

/* ---------------------------------------------------------------- complex */

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
    PyObject *in = import_tensor(state, x, Py_None);
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
        return raise_status(st);
    return export_like(state, x, view);
}

/* Shared by view_as_real and canonicalize: a zero-copy view made by `fn`. */
static PyObject *zero_copy_view(PyObject *module, PyObject *x,
                                pylayout_status (*fn)(pylayout_tensor *, pylayout_tensor **))
{
    core_state *state = get_state(module);
    PyObject *in = import_tensor(state, x, Py_None);
    if (!in)
        return NULL;
    pylayout_tensor *view;
    pylayout_status st = fn(((TensorObject *)in)->tensor, &view);
    Py_DECREF(in);
    if (st != PYLAYOUT_OK)
        return raise_status(st);
    return export_like(state, x, view);
}

static PyObject *mod_view_as_real(PyObject *module, PyObject *z)
{
    return zero_copy_view(module, z, pylayout_view_as_real);
}

static PyObject *mod_canonicalize(PyObject *module, PyObject *x)
{
    return zero_copy_view(module, x, pylayout_tensor_canonicalize);
}

static PyObject *mod_pack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"re", "im", "out", NULL};
    PyObject *re_obj, *im_obj, *out_obj = Py_None, *keep_re = NULL, *keep_im = NULL, *out = NULL, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:pack_complex", kwlist, &re_obj, &im_obj, &out_obj))
        return NULL;
    core_state *state = get_state(module);
    DLTensor s_re, s_im;
    const DLTensor *re = peek_dltensor(state, re_obj, true, &s_re, &keep_re);
    const DLTensor *im = re ? peek_dltensor(state, im_obj, true, &s_im, &keep_im) : NULL;
    pylayout_tensor *fresh = NULL;
    pylayout_status st;
    if (!re || !im)
        goto done;
    if (out_obj == Py_None) {
        DLDataType ct = {kDLComplex, (uint8_t)(re->dtype.bits * 2), 1};
        if (re->dtype.code != kDLFloat || re->dtype.lanes != 1 || re->dtype.bits > 64) {
            PyErr_Format(PyExc_BufferError, "re must be float16, float32 or float64, got %s",
                         dtype_name_or(re->dtype, "an unsupported dtype"));
            goto done;
        }
        if (check_host(re, "re") < 0)
            goto done;
        st = pylayout_tensor_empty(re->ndim, re->shape, ct, PYLAYOUT_FORMAT_CONTIGUOUS, &fresh);
        if (st != PYLAYOUT_OK) {
            raise_status(st);
            goto done;
        }
        out = wrap_tensor(state, fresh);
        if (!out)
            goto done;
        pylayout_tensor_retain(fresh); /* export_like below takes one reference */
    } else {
        out = import_tensor(state, out_obj, Py_None);
        if (!out)
            goto done;
        if (((TensorObject *)out)->flags & PYLAYOUT_FLAG_READ_ONLY) {
            PyErr_SetString(PyExc_ValueError, "out is read-only: its producer did not hand it over for writing");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    st = pylayout_pack_complex(re, im, (DLTensor *)((TensorObject *)out)->dl);
    Py_END_ALLOW_THREADS
    if (st != PYLAYOUT_OK) {
        raise_status(st);
        goto done;
    }
    if (fresh) {
        res = export_like(state, re_obj, fresh);
        fresh = NULL;
    } else {
        res = Py_NewRef(out_obj);
    }
done:
    if (fresh && out) /* error after the extra retain */
        release(fresh);
    Py_XDECREF(out);
    Py_XDECREF(keep_re);
    Py_XDECREF(keep_im);
    return res;
}

static PyObject *mod_unpack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"z", "copy", NULL};
    PyObject *z_obj, *copy = Py_True;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:unpack_complex", kwlist, &z_obj, &copy))
        return NULL;
    int want_copy = PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    core_state *state = get_state(module);
    PyObject *zin = import_tensor(state, z_obj, Py_None);
    if (!zin)
        return NULL;
    pylayout_tensor *re = NULL, *im = NULL;
    const DLTensor *z = ((TensorObject *)zin)->dl;
    pylayout_status st;
    if (!want_copy) {
        st = pylayout_complex_parts(((TensorObject *)zin)->tensor, &re, &im);
    } else {
        DLDataType rt = {kDLFloat, (uint8_t)(z->dtype.bits / 2), 1};
        if (z->dtype.code != kDLComplex) {
            PyErr_Format(PyExc_BufferError, "z must be complex32, complex64 or complex128, got %s",
                         dtype_name_or(z->dtype, "an unsupported dtype"));
            Py_DECREF(zin); /* after the message: z lives in zin */
            return NULL;
        }
        if (check_host(z, "z") < 0) {
            Py_DECREF(zin);
            return NULL;
        }
        st = pylayout_tensor_empty(z->ndim, z->shape, rt, PYLAYOUT_FORMAT_CONTIGUOUS, &re);
        if (st == PYLAYOUT_OK)
            st = pylayout_tensor_empty(z->ndim, z->shape, rt, PYLAYOUT_FORMAT_CONTIGUOUS, &im);
        if (st == PYLAYOUT_OK) {
            const DLTensor *dre, *dim;
            pylayout_tensor_dltensor(re, &dre);
            pylayout_tensor_dltensor(im, &dim);
            Py_BEGIN_ALLOW_THREADS
            st = pylayout_unpack_complex(z, (DLTensor *)dre, (DLTensor *)dim);
            Py_END_ALLOW_THREADS
        }
    }
    Py_DECREF(zin);
    if (st != PYLAYOUT_OK) {
        release(re);
        release(im);
        return raise_status(st);
    }
    PyObject *a = export_like(state, z_obj, re);
    PyObject *b = a ? export_like(state, z_obj, im) : (release(im), NULL);
    if (!b) {
        Py_XDECREF(a);
        return NULL;
    }
    return Py_BuildValue("(NN)", a, b);
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
    pylayout_status st = _pylayout_set_num_threads_quietly(n, &warn, &machine);
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

/* Test hook: the threads the calling thread's last copy was entitled to (internal.h). */
static PyObject *mod_last_copy_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(_pylayout_last_copy_threads());
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

static PyMethodDef module_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))mod_from_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {"is_contiguous", (PyCFunction)(void (*)(void))mod_is_contiguous, METH_VARARGS | METH_KEYWORDS, NULL},
    {"suggest_format", mod_suggest_format, METH_O, NULL},
    {"is_dense", mod_is_dense, METH_O, NULL},
    {"empty", (PyCFunction)(void (*)(void))mod_empty, METH_VARARGS | METH_KEYWORDS, NULL},
    {"contiguous", (PyCFunction)(void (*)(void))mod_convert, METH_VARARGS | METH_KEYWORDS, NULL},
    {"to_order", (PyCFunction)(void (*)(void))mod_to_order, METH_VARARGS | METH_KEYWORDS, NULL},
    {"copy_into", (PyCFunction)(void (*)(void))mod_copy_into, METH_VARARGS | METH_KEYWORDS, NULL},
    {"view_as_complex", (PyCFunction)(void (*)(void))mod_view_as_complex, METH_VARARGS | METH_KEYWORDS, NULL},
    {"view_as_real", mod_view_as_real, METH_O, NULL},
    {"canonicalize", mod_canonicalize, METH_O, NULL},
    {"pack_complex", (PyCFunction)(void (*)(void))mod_pack_complex, METH_VARARGS | METH_KEYWORDS, NULL},
    {"unpack_complex", (PyCFunction)(void (*)(void))mod_unpack_complex, METH_VARARGS | METH_KEYWORDS, NULL},
    {"set_num_threads", mod_set_num_threads, METH_O, NULL},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS, NULL},
    {"_last_copy_threads", mod_last_copy_threads, METH_NOARGS, NULL},
    {"set_cache_limit", mod_set_cache_limit, METH_O,
     "set_cache_limit(nbytes)\n--\n\nCaps the bytes of released large outputs (>= 32 MiB) kept for reuse,\n"
     "lazily freed so the kernel reclaims them under memory pressure; 0 releases\n"
     "them now and turns the cache off.  Default: $PYLAYOUT_CACHE_LIMIT, else RAM / 8 (at least 1 GiB)."},
    {"cache_info", mod_cache_info, METH_NOARGS,
     "cache_info()\n--\n\n{'limit': bytes, 'held': bytes} of the output reuse cache."},
    {"build_info", mod_build_info, METH_NOARGS, NULL},
    {"_to_type", mod_to_type, METH_VARARGS, NULL},
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
    state->exchange_cache = PyDict_New();
    state->str_dlpack = PyUnicode_InternFromString("__dlpack__");
    state->str_exchange = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    state->kw_max_version = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
    if (!state->exchange_cache || !state->str_dlpack || !state->str_exchange || !state->kw_max_version)
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
    Py_VISIT(state->exchange_cache);
    return 0;
}

static int module_clear(PyObject *module)
{
    core_state *state = get_state(module);
    Py_CLEAR(state->TensorType);
    Py_CLEAR(state->exchange_cache);
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
