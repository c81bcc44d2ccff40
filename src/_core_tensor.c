/*
 * _core_tensor.c - the pylayout.Tensor type.
 *
 * A Tensor owns one reference to a core pylayout_tensor, which owns the
 * producer's export: wrapping, the read-only attributes, repr, the buffer
 * protocol (CPU memory, counted in bytes), and the way out again
 * (__dlpack__, __dlpack_device__, __array__) with the destructors of the
 * capsules it hands out.  How objects get in is _core_import.c's job.
 */
#include "_core.h"

#include <string.h>

/* ------------------------------------------------------------ Tensor type */

/* pylayout_tensor_release, keeping any pending Python exception: the last
 * _plext_release runs the producer's deleter, which may run Python code (NumPy's
 * does), and must neither see nor clobber an error being raised. */
void _plext_release(pylayout_tensor *t)
{
    if (!t)
        return;
    PyObject *exc = PyErr_GetRaisedException_compat();
    pylayout_tensor_release(t);
    if (exc)
        PyErr_SetRaisedException_compat(exc);
}

PyObject *_plext_wrap_tensor(core_state *state, pylayout_tensor *t)
{
    /* Steals the reference to t. */
    TensorObject *self = PyObject_New(TensorObject, state->TensorType);
    if (!self) {
        _plext_release(t);
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
PyObject *_plext_wrap_managed(core_state *state, DLManagedTensorVersioned *m)
{
    pylayout_tensor *t;
    pylayout_status st = pylayout_tensor_from_versioned(m, &t);
    if (st != PYLAYOUT_OK) {
        if (m->deleter)
            m->deleter(m);
        return _plext_raise_status(st);
    }
    return _plext_wrap_tensor(state, t);
}

static void Tensor_dealloc(PyObject *op)
{
    TensorObject *self = (TensorObject *)op;
    PyTypeObject *tp = Py_TYPE(op);
    _plext_release(self->tensor);
    PyObject_Free(op);
    Py_DECREF(tp);
}

bool _plext_is_our_tensor(PyObject *obj)
{
    /* By the dealloc slot, not by module state: true in every interpreter
     * and for every copy of the module, and it runs no Python. */
    return Py_TYPE(obj)->tp_dealloc == Tensor_dealloc;
}

static PyObject *Tensor_get_shape(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    return _plext_int64_tuple(dl->shape, dl->ndim);
}

static PyObject *Tensor_get_strides(PyObject *op, void *c)
{
    (void)c;
    const DLTensor *dl = ((TensorObject *)op)->dl;
    return _plext_int64_tuple(dl->strides, dl->ndim);
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
    shape = _plext_int64_tuple(dl->shape, dl->ndim);
    strides = _plext_int64_tuple(dl->strides, dl->ndim);
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

/* ----------------------------------------------------------------- copies */

/* A new Tensor holding a copy of src laid out like src (pylayout_like_order:
 * the same strides if src is dense, so the copy is a memcpy).  Raises on
 * failure. */
pylayout_tensor *_plext_copy_tensor(const DLTensor *src)
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
        _plext_raise_status(st);
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
    if (_plext_parse_device(dl_device, &want, &given) < 0)
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
        _plext_release(t);
        t = _plext_copy_tensor(dl);
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
    _plext_release(t);
    if (st != PYLAYOUT_OK) {
        if (st == PYLAYOUT_ERR_READ_ONLY)
            PyErr_SetString(PyExc_BufferError, pylayout_last_error());
        else
            _plext_raise_status(st);
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

static PyType_Slot Tensor_slots[] = {
    {Py_tp_dealloc, Tensor_dealloc},
    {Py_tp_repr, Tensor_repr},
    {Py_tp_getset, Tensor_getset},
    {Py_tp_methods, Tensor_methods},
    {Py_bf_getbuffer, Tensor_getbuffer},
    {Py_bf_releasebuffer, Tensor_releasebuffer},
    {Py_tp_doc, "A strided tensor exchanged through DLPack: a zero-copy view of a producer's memory.\n\n"
                "Create one with pylayout.from_dlpack(x).  It supports __dlpack__, the buffer protocol "
                "(CPU only) and the DLPack C exchange API."},
    {0, NULL},
};

PyType_Spec _plext_tensor_spec = {
    .name = "pylayout.Tensor",
    .basicsize = sizeof(TensorObject),
    /* Immutable, as a builtin type is: nobody rebinds __dlpack__ or swaps
     * the exchange-API capsule that other libraries read from C.  No
     * constructor: a Tensor exists only over memory that was handed over
     * (from_dlpack, empty, the exchange API), never half made. */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Tensor_slots,
};
