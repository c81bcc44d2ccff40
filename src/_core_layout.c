/*
 * _core_layout.c - module functions: import, layout queries, conversions.
 *
 * from_dlpack, is_contiguous, suggest_format, is_dense, empty, contiguous,
 * to_order, copy_into, the strides queries and _to_type.  Each one parses
 * its arguments, takes its operands through the boundary (_core_import.c)
 * and calls the C core; the layout rules themselves live in the core.
 */
#include "_core.h"

PyObject *_plext_mod_from_dlpack(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "device", "copy", NULL};
    PyObject *x, *device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:from_dlpack", kwlist, &x, &device, &copy))
        return NULL;
    core_state *state = get_state(module);
    DLDevice want;
    int given, want_copy = 0;
    if (_plext_parse_device(device, &want, &given) < 0)
        return NULL;
    if (copy != Py_None && (want_copy = PyObject_IsTrue(copy)) < 0)
        return NULL;
    /* Only a producer reached through __dlpack__ sees copy=; it says it
     * copied by setting IS_COPIED.  Everything else is copied here. */
    bool producer_may_copy = !Py_IS_TYPE(x, state->TensorType) && !PyCapsule_CheckExact(x) &&
                             !_plext_exchange_api_of(state, Py_TYPE(x));
    if (PyErr_Occurred())
        return NULL;
    PyObject *in = _plext_import_tensor(state, x, copy), *res = NULL;
    if (!in)
        return NULL;
    const DLTensor *dl = ((TensorObject *)in)->dl;
    if (given && (want.device_type != dl->device.device_type || want.device_id != dl->device.device_id)) {
        PyErr_Format(PyExc_BufferError,
                     "the tensor lives on device (%d, %d), not (%d, %d); pylayout does not move data between "
                     "devices",
                     (int)dl->device.device_type, (int)dl->device.device_id, (int)want.device_type,
                     (int)want.device_id);
        goto done;
    }
    if (want_copy && !(producer_may_copy && (((TensorObject *)in)->flags & PYLAYOUT_FLAG_IS_COPIED))) {
        pylayout_tensor *c = _plext_copy_tensor(dl);
        res = c ? _plext_wrap_tensor(state, c) : NULL;
    } else {
        res = Py_NewRef(in);
    }
done:
    Py_DECREF(in);
    return res;
}

PyObject *_plext_mod_is_contiguous(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", "memory_format", NULL};
    PyObject *x, *fmt_obj = NULL, *mf_obj = NULL, *res = NULL;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$O:is_contiguous", kwlist, &x, &fmt_obj, &mf_obj))
        return NULL;
    if (_plext_parse_format_args(fmt_obj, mf_obj, &fmt, true) < 0)
        return NULL;
    operand op; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&op);
    bool result = false;
    const DLTensor *dl = _plext_query_operand(get_state(module), x, &op);
    if (dl) {
        pylayout_status st = fmt == FORMAT_PRESERVE ? pylayout_is_dense(dl, &result)
                                                    : pylayout_is_contiguous(dl, fmt, &result);
        res = st != PYLAYOUT_OK ? _plext_raise_status(st) : PyBool_FromLong(result);
    }
    _plext_operand_release(&op);
    return res;
}

static PyObject *suggest_format_of(const DLTensor *dl)
{
    pylayout_format fmt;
    pylayout_status st = pylayout_suggest_format(dl, &fmt);
    return st != PYLAYOUT_OK ? _plext_raise_status(st) : PyUnicode_FromString(format_name(fmt));
}

PyObject *_plext_mod_suggest_format(PyObject *module, PyObject *x)
{
    return _plext_query(module, x, suggest_format_of);
}

static PyObject *is_dense_of(const DLTensor *dl)
{
    bool result = false;
    pylayout_status st = pylayout_is_dense(dl, &result);
    return st != PYLAYOUT_OK ? _plext_raise_status(st) : PyBool_FromLong(result);
}

PyObject *_plext_mod_is_dense(PyObject *module, PyObject *x)
{
    return _plext_query(module, x, is_dense_of);
}

PyObject *_plext_mod_empty(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"shape", "dtype", "format", "order", NULL};
    PyObject *shape_obj, *dtype_obj = NULL, *fmt_obj = NULL, *order_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OO:empty", kwlist, &shape_obj, &dtype_obj, &fmt_obj,
                                     &order_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM];
    int32_t ndim, order_n, order[PYLAYOUT_MAX_NDIM];
    DLDataType dt = {kDLFloat, 32, 1};
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (_plext_parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0)
        return NULL;
    if (dtype_obj && _plext_parse_dtype(dtype_obj, &dt) < 0)
        return NULL;
    if (fmt_obj == Py_None)
        fmt_obj = NULL;
    if (fmt_obj && _plext_parse_format(fmt_obj, &fmt) < 0)
        return NULL;
    pylayout_tensor *t;
    pylayout_status st;
    if (order_obj != Py_None) {
        if (fmt_obj) {
            PyErr_SetString(PyExc_ValueError, "give format or order, not both");
            return NULL;
        }
        if (_plext_parse_order(order_obj, order, &order_n) < 0)
            return NULL;
        if (order_n != ndim) {
            PyErr_Format(PyExc_ValueError, "order has %d entries but shape has %d", (int)order_n, (int)ndim);
            return NULL;
        }
        st = pylayout_tensor_empty_order(ndim, shape, dt, order, &t);
    } else {
        st = pylayout_tensor_empty(ndim, shape, dt, fmt, &t);
    }
    if (st != PYLAYOUT_OK)
        return _plext_raise_status(st);
    return _plext_wrap_tensor(get_state(module), t);
}

/* numpy.empty(shape, dtype[, "F"]), looked up once. */
static PyObject *numpy_empty(core_state *state, PyObject *shape, PyObject *dtype, bool fortran)
{
    PyObject *empty = _plext_lazy_attr(&state->np_empty, "numpy", "empty");
    PyObject *args[3] = {shape, dtype, state->str_F};
    return empty ? PyObject_Vectorcall(empty, args, fortran ? 3 : 2, NULL) : NULL;
}

/* contiguous's copy of a small exact numpy.ndarray (taken through its
 * buffer) into C or Fortran order, made as NumPy makes its own:
 * numpy.empty(x.shape, x.dtype, order) filled by the copy engine, with no
 * pylayout tensor, export or from_dlpack (a third of a 1 KB call).  NULL
 * with no error set where the caller converts as for any producer: other
 * formats; results over SMALL_COPY_BYTES, which pylayout allocates (its
 * reuse cache, and its retry after releasing the cache when memory runs
 * short); and a MemoryError from numpy.empty, for that retry.  The
 * result is made first, and x's memory read after (phase 2 from there):
 * numpy.empty is Python, and may be anyone's. */
static PyObject *ndarray_convert(core_state *state, operand *x, pylayout_format fmt)
{
    const DLTensor *dl = x->dl; /* phase 1's metadata */
    if ((fmt != PYLAYOUT_FORMAT_CONTIGUOUS && fmt != PYLAYOUT_FORMAT_FORTRAN) || !_plext_is_small(dl))
        return NULL;
    PyObject *dtype = PyObject_GetAttr(x->obj, state->str_dtype);
    PyObject *shape = dtype ? _plext_int64_tuple(dl->shape, dl->ndim) : NULL;
    PyObject *out = shape ? numpy_empty(state, shape, dtype, fmt == PYLAYOUT_FORMAT_FORTRAN) : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    if (!out) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            PyErr_Clear();
        return NULL;
    }
    Py_buffer v;
    if (!Py_IS_TYPE(out, state->ndarray_type) || PyObject_GetBuffer(out, &v, PyBUF_STRIDES | PyBUF_WRITABLE) < 0) {
        Py_DECREF(out);
        PyErr_Clear();
        return NULL;
    }
    /* what numpy.empty makes, unless someone replaced it: then the general
     * way.  Not take_ndarray: x's dtype is known, and asking the result's
     * buffer for its format cost 0.025 us of a 0.6 us call. */
    bool as_asked = v.ndim == dl->ndim && (size_t)v.itemsize == itemsize_of(dl->dtype);
    int64_t strides[PYLAYOUT_MAX_NDIM];
    for (int i = 0; as_asked && i < dl->ndim; i++) {
        as_asked = v.shape[i] == dl->shape[i] && v.strides[i] % v.itemsize == 0;
        strides[i] = v.strides[i] / (int64_t)v.itemsize;
    }
    if (!as_asked) {
        PyBuffer_Release(&v);
        Py_DECREF(out);
        PyErr_Clear();
        return NULL;
    }
    /* phase 2: x's memory is checked to be dl's still, then copied */
    int memory = _plext_operands_memory(&x, 1);
    DLTensor d = {v.buf, dl->device, dl->ndim, dl->dtype, dl->shape, strides, 0};
    pylayout_status st = memory < 0 ? PYLAYOUT_OK : pylayout_copy(dl, &d); /* small: with the GIL */
    PyBuffer_Release(&v);
    if (memory < 0 || st != PYLAYOUT_OK) {
        Py_DECREF(out);
        return memory < 0 ? NULL : _plext_raise_status(st);
    }
    return out;
}

/* The copying half of contiguous() and to_order(): x's metadata said a copy
 * is needed.  Guards x, reads its memory afresh (rule 1), fills a new tensor
 * dense in `order` (or `fmt` when order is NULL) with the GIL released, and
 * returns it as the kind of object x is.  `n_order` is the length the order
 * was checked against: the fresh read must still have that many dims. */
static PyObject *convert_like(core_state *state, operand *x, pylayout_format fmt, const int32_t *order,
                              int32_t n_order, bool ready)
{
    pylayout_tensor *out = NULL;
    pylayout_status st;
    if ((x->view.obj || x->np_array) && !order) { /* reads the memory itself, after making its result */
        PyObject *res = ndarray_convert(state, x, fmt);
        if (res || PyErr_Occurred())
            return res;
    }
    /* ready: the caller has run the guard and read the memory already */
    if (!ready && (_plext_operand_guard(x) < 0 || _plext_operands_memory(&x, 1) < 0)) /* phase 2 from here */
        return NULL;
    if (order && x->dl->ndim != n_order) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but the tensor has %d dims", (int)n_order,
                     (int)x->dl->ndim);
        return NULL;
    }
    if (_plext_check_host(x->dl, "the input") < 0)
        return NULL;
    const DLTensor *dl = x->dl;
    if (_plext_is_small(dl)) { /* keeping the GIL is cheaper than the two switches */
        st = order ? pylayout_convert_order(dl, order, &out) : pylayout_convert(dl, fmt, &out);
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = order ? pylayout_convert_order(dl, order, &out) : pylayout_convert(dl, fmt, &out);
        Py_END_ALLOW_THREADS
    }
    if (st != PYLAYOUT_OK)
        return _plext_raise_status(st);
    return _plext_export_like(state, x->obj, out); /* memory done: Python may run again */
}

/* A copy of x laid out like x (_plext_copy_tensor), for torch.preserve_format. */
static PyObject *copy_like(core_state *state, operand *x, bool ready)
{
    if (!ready && (_plext_operand_guard(x) < 0 || _plext_operands_memory(&x, 1) < 0))
        return NULL;
    if (_plext_check_host(x->dl, "the input") < 0)
        return NULL;
    pylayout_tensor *out = _plext_copy_tensor(x->dl);
    return out ? _plext_export_like(state, x->obj, out) : NULL;
}

/* contiguous's decision for an operand already taken (its DLTensor known):
 * x itself when it is in fmt (dense, for torch.preserve_format) and no
 * copy is asked for, the refusal copy=False calls for, else the converted
 * copy.  want_copy as _plext_parse_copy gives it; ready as convert_like. */
static PyObject *convert_in_format(core_state *state, operand *x, pylayout_format fmt, int want_copy, bool ready)
{
    bool already = false; /* false for channels_last formats of the wrong rank */
    pylayout_status st = fmt == FORMAT_PRESERVE ? pylayout_is_dense(x->dl, &already)
                                                : pylayout_is_contiguous(x->dl, fmt, &already);
    if (st != PYLAYOUT_OK)
        return _plext_raise_status(st);
    if (already && want_copy != 1)
        return Py_NewRef(x->obj);
    if (!already && want_copy == 0) {
        PyErr_Format(PyExc_ValueError, "copy=False, but the tensor is not %s: converting it needs a copy",
                     fmt == FORMAT_PRESERVE ? "dense" : format_name(fmt));
        return NULL;
    }
    /* dense in its own stride order for preserve_format (copy_like) */
    return fmt == FORMAT_PRESERVE ? copy_like(state, x, ready) : convert_like(state, x, fmt, NULL, 0, ready);
}

PyObject *_plext_mod_convert(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "format", "memory_format", "copy", NULL};
    PyObject *x_obj, *fmt_obj = NULL, *mf_obj = NULL, *copy = Py_None, *res = NULL;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    int want_copy;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OO:to_format", kwlist, &x_obj, &fmt_obj, &mf_obj, &copy))
        return NULL;
    if (_plext_parse_format_args(fmt_obj, mf_obj, &fmt, true) < 0 || _plext_parse_copy(copy, &want_copy) < 0)
        return NULL;
    core_state *state = get_state(module);
    operand x; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&x);
    if (!_plext_query_operand(state, x_obj, &x))
        goto done;
    res = convert_in_format(state, &x, fmt, want_copy, false);
done:
    _plext_operand_release(&x);
    return res;
}

/* convert_or_route for a torch tensor off the CPU that no autograd follows
 * (operand_route read 0; the guard and torch's export passed): pylayout
 * decides the layout with its C rules, as pylayout.torch does, and
 * torch moves the bytes on the tensor's device through pylayout.torch's
 * _on_device, with none of that module's Python frames in front (with
 * them, a call took 1.6-2.1x torch's own .contiguous() on an H100's host;
 * without, 1.1-1.3x).  NotImplemented where the full path decides: a
 * format the rank refuses, preserve_format, a subclass or an active
 * dispatch mode (torch_eager), or pylayout.torch not yet imported.  Only
 * the tensor's metadata is read: Python may run. */
static PyObject *device_convert(core_state *state, operand *x, pylayout_format fmt)
{
    const DLTensor *dl = x->dl;
    int64_t strides[PYLAYOUT_MAX_NDIM];
    bool already = false;
    if (fmt == FORMAT_PRESERVE || pylayout_is_contiguous(dl, fmt, &already) != PYLAYOUT_OK ||
        (!already && pylayout_format_strides(dl->ndim, dl->shape, fmt, strides) != PYLAYOUT_OK))
        return Py_NewRef(Py_NotImplemented);
    if (already)
        return Py_NewRef(x->obj);
    int eager = state->py_on_device ? _plext_torch_eager(state, x->obj) : 0;
    if (eager <= 0)
        return eager < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *st = _plext_int64_tuple(strides, dl->ndim);
    if (!st)
        return NULL;
    PyObject *args[2] = {x->obj, st};
    PyObject *res = PyObject_Vectorcall(state->py_on_device, args, 2, NULL);
    Py_DECREF(st);
    return res;
}

/* pylayout.contiguous's fast path (no copy=, positional): the same result
 * as contiguous(x, format), or NotImplemented for a torch tensor that
 * pylayout.torch must convert (operand_route), that a torch guard refuses
 * or that torch cannot export here (meta, sparse): the full path handles
 * those.  Every step is taken once:
 * take, route, guard, then the memory, read once and used for both the
 * layout test and the copy. */
PyObject *_plext_mod_convert_or_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "convert_or_route takes 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    core_state *state = get_state(module);
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS; /* the default, passed as the same interned str */
    if (args[1] != state->str_contiguous && _plext_parse_format_args(args[1], NULL, &fmt, true) < 0)
        return NULL;
    if (_plext_is_ndarray(state, args[0])) { /* small ones, without the exchange */
        PyObject *res = _plext_numpy_convert(state, args[0], fmt);
        if (res || PyErr_Occurred())
            return res;
    }
    operand x; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&x);
    PyObject *res = NULL;
    int route = _plext_operand_take(state, args[0], &x) < 0 ? -1 : _plext_operand_route(&x);
    /* A torch tensor's memory is read here, once, for its device and for
     * torch's refusals; any other operand's when it is copied (an ndarray's
     * small result is made first: ndarray_convert).  A refusal by the guard
     * or by torch's export goes to the full path, which gives the same
     * answer (x itself if it is already in format, a conj-bit tensor
     * included) or says why. */
    operand *const ops[1] = {&x};
    if (route == 2) { /* a meta tensor: its metadata, and on as any device tensor (the tests' stand-in for CUDA) */
        res = _plext_operand_memory(&x, false) < 0 ? NULL : device_convert(state, &x, fmt);
        goto done;
    }
    if (route == 0 && (_plext_operand_guard(&x) < 0 ||
                       (x.is_torch ? _plext_operands_memory(ops, 1) : _plext_operand_memory(&x, false)) < 0)) {
        if (!x.is_torch)
            goto done;
        PyErr_Clear();
        route = 1;
    }
    if (route == 0 && x.is_torch && x.dl->device.device_type != kDLCPU) {
        res = device_convert(state, &x, fmt); /* pylayout decides the layout there and torch moves the bytes */
        goto done;
    }
    if (route != 0) {
        res = route > 0 ? Py_NewRef(Py_NotImplemented) : NULL;
        goto done;
    }
    res = convert_in_format(state, &x, fmt, -1, x.is_torch);
done:
    _plext_operand_release(&x);
    return res;
}

/* fn(*args, **kwnames), fn a Python half of pylayout.contiguous or
 * copy_into; an error when pylayout's __init__ has not installed it (_core
 * used on its own). */
static PyObject *call_python_half(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "pylayout._core's public functions need their Python halves: import pylayout");
        return NULL;
    }
    return PyObject_Vectorcall(fn, args, (size_t)nargs, kwnames);
}

/* torch.compiler.is_compiling(): 1, 0, or -1 with an error.  Its body is
 * `return _is_compiling_flag` (under TorchScript, False: never here), so
 * the flag is read from the module's dict, as the function reads it, without
 * the function call (55 ns of every torch conversion).  Where the flag is
 * missing (another torch), the function is called.  test_torch_integration
 * runs non-strict torch.export, which sets the flag, over both fronts. */
static int torch_is_compiling(core_state *state)
{
    if (!state->torch_compiler && !(state->torch_compiler = PyImport_ImportModule("torch.compiler")))
        return -1;
    PyObject *flag = PyDict_GetItemWithError(PyModule_GetDict(state->torch_compiler), state->str_compiling_flag);
    if (flag) {
        Py_INCREF(flag); /* a __bool__ could rebind the attribute */
        int compiling = PyObject_IsTrue(flag);
        Py_DECREF(flag);
        return compiling;
    }
    if (PyErr_Occurred())
        return -1;
    PyObject *r = PyObject_CallMethod(state->torch_compiler, "is_compiling", NULL);
    int compiling = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return compiling;
}

/* Whether any of xs is a torch tensor while torch.compiler.is_compiling():
 * 1, 0, or -1 with an error.  Then only pylayout.torch's ops may take it. */
static int torch_compiling(core_state *state, PyObject *const *xs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        int torch = _plext_is_torch_type(state, Py_TYPE(xs[i]));
        if (torch <= 0) {
            if (torch < 0)
                return -1;
            continue;
        }
        return torch_is_compiling(state);
    }
    return 0;
}

/* pylayout.contiguous itself.  Its common call, contiguous(x) or
 * contiguous(x, format), is convert_or_route's, here in C: a Python function
 * in front of it was most of a 1 KB array's conversion.  That call takes
 * any x but a torch tensor while torch.compiler.is_compiling() (non-strict
 * torch.export sets it: the tensors are then fake, and only pylayout.torch's
 * ops can take them).  Every other call goes to the Python half: keywords,
 * to the whole of it; a route to pylayout.torch (NotImplemented), to the
 * route after the fast path.  torch.compile never calls this function: it
 * traces the Python half in its place (pylayout/_compile.py). */
PyObject *_plext_mod_contiguous(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    core_state *state = get_state(module);
    if (kwnames || nargs < 1 || nargs > 2)
        return call_python_half(state->py_contiguous, args, nargs, kwnames);
    PyObject *x = args[0], *pair[2] = {x, nargs == 2 ? args[1] : state->str_contiguous};
    int compiling = torch_compiling(state, args, 1);
    if (compiling < 0)
        return NULL;
    PyObject *res = compiling ? Py_NewRef(Py_NotImplemented) : _plext_mod_convert_or_route(module, pair, 2);
    if (!res)
        return NULL;
    if (res != Py_NotImplemented) {
        if (!Py_IS_TYPE(res, state->TensorType) || Py_IS_TYPE(x, state->TensorType))
            return res;
        PyObject *xres[2] = {x, res}; /* another producer's result, as its kind */
        PyObject *out = call_python_half(state->py_like, xres, 2, NULL);
        Py_DECREF(res);
        return out;
    }
    Py_DECREF(res);
    PyObject *rargs[4] = {pair[0], pair[1], Py_None, Py_None};
    return call_python_half(state->py_contiguous_route, rargs, 4, NULL);
}

PyObject *_plext_mod_to_order(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "order", "copy", NULL};
    PyObject *x_obj, *order_obj, *copy = Py_None, *res = NULL;
    int want_copy;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:to_order", kwlist, &x_obj, &order_obj, &copy) ||
        _plext_parse_copy(copy, &want_copy) < 0)
        return NULL;
    core_state *state = get_state(module);
    int32_t order[PYLAYOUT_MAX_NDIM], n;
    if (_plext_parse_order(order_obj, order, &n) < 0)
        return NULL;
    operand x; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&x);
    pylayout_status st;
    if (!_plext_query_operand(state, x_obj, &x))
        goto done;
    if (n != x.dl->ndim) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but the tensor has %d dims", (int)n, (int)x.dl->ndim);
        goto done;
    }
    bool already = false;
    if ((st = pylayout_is_in_order(x.dl, order, &already)) != PYLAYOUT_OK) {
        _plext_raise_status(st);
        goto done;
    }
    if (already && want_copy != 1)
        res = Py_NewRef(x_obj);
    else if (!already && want_copy == 0)
        PyErr_SetString(PyExc_ValueError, "copy=False, but the tensor is not dense in that order: converting "
                                          "it needs a copy");
    else
        res = convert_like(state, &x, PYLAYOUT_FORMAT_CONTIGUOUS, order, n, false);
done:
    _plext_operand_release(&x);
    return res;
}

/* copy_into and its fast path: with may_route, NotImplemented (before any
 * memory is read) when either operand is a torch tensor that pylayout.torch
 * must handle (operand_route) or lives off the CPU. */
static PyObject *copy_into(PyObject *module, PyObject *dst_obj, PyObject *src_obj, bool may_route)
{
    PyObject *res = NULL;
    core_state *state = get_state(module);
    operand dst, src; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&dst); _plext_operand_init(&src);
    /* Phase 1: every operand's Python-level work, dst's included. */
    if (_plext_operand_take(state, dst_obj, &dst) < 0 || _plext_operand_take(state, src_obj, &src) < 0)
        goto done;
    if (may_route) {
        int r = _plext_operand_route(&dst);
        if (r == 0)
            r = _plext_operand_route(&src);
        if (r != 0) {
            res = r > 0 ? Py_NewRef(Py_NotImplemented) : NULL;
            goto done;
        }
    }
    /* Phase 2: the memory, read now and used before any Python runs.  A
     * torch operand that the guard or torch's export refuses goes to the
     * full path, which reads its device first: off the CPU torch copies,
     * honouring the conjugate and negative bits that the C core refuses;
     * on it (and for meta or sparse tensors) the full path says why. */
    operand *const ops[2] = {&dst, &src};
    if (_plext_operand_guard(&dst) < 0 || _plext_operand_guard(&src) < 0 || _plext_operands_memory(ops, 2) < 0) {
        if (may_route && (dst.is_torch || src.is_torch)) {
            PyErr_Clear();
            res = Py_NewRef(Py_NotImplemented);
        }
        goto done;
    }
    if (may_route && ((dst.is_torch && dst.dl->device.device_type != kDLCPU) ||
                      (src.is_torch && src.dl->device.device_type != kDLCPU))) {
        res = Py_NewRef(Py_NotImplemented); /* torch copies there */
        goto done;
    }
    if (dst.flags & PYLAYOUT_FLAG_READ_ONLY) {
        PyErr_SetString(PyExc_ValueError, "dst is read-only: its producer did not hand it over for writing");
        goto done;
    }
    if (_plext_check_host(dst.dl, "dst") < 0 || _plext_check_host(src.dl, "src") < 0)
        goto done;
    pylayout_status st;
    const DLTensor *s = src.dl;
    DLTensor *d = (DLTensor *)dst.dl;
    if (_plext_is_small(s)) { /* keeping the GIL is cheaper than the two switches */
        st = pylayout_copy(s, d);
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = pylayout_copy(s, d);
        Py_END_ALLOW_THREADS
    }
    if (st != PYLAYOUT_OK) {
        _plext_raise_status(st);
        goto done;
    }
    if (_plext_operand_written(state, &dst) < 0)
        goto done;
    res = Py_NewRef(dst_obj);
done:
    _plext_operand_release(&src);
    _plext_operand_release(&dst);
    return res;
}

PyObject *_plext_mod_copy_into(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dst", "src", NULL};
    PyObject *dst_obj, *src_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:copy_core", kwlist, &dst_obj, &src_obj))
        return NULL;
    return copy_into(module, dst_obj, src_obj, false);
}

/* pylayout.copy_into's fast path: _core.copy_core(dst, src), or
 * NotImplemented for torch operands that pylayout.torch handles (autograd,
 * forward AD, functorch, off the CPU), decided before any memory is read. */
PyObject *_plext_mod_copy_into_or_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "copy_into_or_route takes 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    return copy_into(module, args[0], args[1], true);
}

/* pylayout.copy_into itself, as pylayout.contiguous is (see there): its
 * positional call copy_into(dst, src) is copy_into_or_route's, in C; keyword
 * calls go to its Python half, _copy_into, and routes to pylayout.torch to
 * _copy_into_route. */
PyObject *_plext_mod_copy_into_front(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    core_state *state = get_state(module);
    if (kwnames || nargs != 2)
        return call_python_half(state->py_copy_into, args, nargs, kwnames);
    int compiling = torch_compiling(state, args, 2);
    if (compiling < 0)
        return NULL;
    PyObject *res = compiling ? Py_NewRef(Py_NotImplemented) : copy_into(module, args[0], args[1], true);
    if (res != Py_NotImplemented)
        return res;
    Py_DECREF(res);
    return call_python_half(state->py_copy_into_route, args, 2, NULL);
}

/* The strides of x with its size-1 dims' strides canonical
 * (pylayout_canonical_strides).  Metadata only. */
static PyObject *canonical_strides_of(const DLTensor *dl)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    pylayout_status st = pylayout_canonical_strides(dl, strides);
    return st != PYLAYOUT_OK ? _plext_raise_status(st) : _plext_int64_tuple(strides, dl->ndim);
}

PyObject *_plext_mod_canonical_strides(PyObject *module, PyObject *x)
{
    return _plext_query(module, x, canonical_strides_of);
}

/* The strides pylayout gives a dense tensor of `shape` in a format or a dim
 * order (pylayout_format_strides / pylayout_order_strides): what a
 * conversion would produce, for backends that move the bytes themselves
 * (torch on CUDA, meta). */
PyObject *_plext_mod_format_strides(PyObject *module, PyObject *args, PyObject *kwds)
{
    (void)module;
    static char *kwlist[] = {"shape", "format", NULL};
    PyObject *shape_obj, *fmt_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:format_strides", kwlist, &shape_obj, &fmt_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    int32_t ndim;
    pylayout_format fmt = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (_plext_parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0 ||
        (fmt_obj && _plext_parse_format(fmt_obj, &fmt) < 0))
        return NULL;
    pylayout_status st = pylayout_format_strides(ndim, shape, fmt, strides);
    return st != PYLAYOUT_OK ? _plext_raise_status(st) : _plext_int64_tuple(strides, ndim);
}

PyObject *_plext_mod_order_strides(PyObject *module, PyObject *args, PyObject *kwds)
{
    (void)module;
    static char *kwlist[] = {"shape", "order", NULL};
    PyObject *shape_obj, *order_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:order_strides", kwlist, &shape_obj, &order_obj))
        return NULL;
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    int32_t ndim, n, order[PYLAYOUT_MAX_NDIM];
    if (_plext_parse_int64_seq(shape_obj, "shape must be a sequence of ints", shape, &ndim) < 0 ||
        _plext_parse_order(order_obj, order, &n) < 0)
        return NULL;
    if (n != ndim) {
        PyErr_Format(PyExc_ValueError, "order has %d entries but shape has %d", (int)n, (int)ndim);
        return NULL;
    }
    pylayout_status st = pylayout_order_strides(ndim, shape, order, strides);
    return st != PYLAYOUT_OK ? _plext_raise_status(st) : _plext_int64_tuple(strides, ndim);
}

PyObject *_plext_mod_to_type(PyObject *module, PyObject *args)
{
    PyObject *tensor, *target;
    if (!PyArg_ParseTuple(args, "OO!:_to_type", &tensor, &PyType_Type, &target))
        return NULL;
    core_state *state = get_state(module);
    if (!Py_IS_TYPE(tensor, state->TensorType)) {
        PyErr_SetString(PyExc_TypeError, "expected a pylayout.Tensor");
        return NULL;
    }
    const DLPackExchangeAPI *api = _plext_exchange_api_of(state, (PyTypeObject *)target);
    if (!api) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    return _plext_export_through(api, ((TensorObject *)tensor)->tensor);
}
