/*
 * _core_complex.c - module functions: complex views, packing, unpacking.
 *
 * view_as_complex, view_as_real, canonicalize (the zero-copy views, which
 * refuse torch tensors: rule 2 of _core_import.c), pack_complex,
 * unpack_complex and complex_view_strides, over the core's complex calls.
 */
#include "_core.h"

PyObject *_plext_mod_view_as_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "copy", NULL};
    PyObject *x, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:view_as_complex", kwlist, &x, &copy))
        return NULL;
    int want_copy = copy == Py_None ? -1 : PyObject_IsTrue(copy); /* -1: copy only if needed */
    if (copy != Py_None && want_copy < 0)
        return NULL;
    core_state *state = get_state(module);
    PyObject *in = _plext_import_for_view(state, x, "view_as_complex"), *res = NULL;
    if (!in)
        return NULL;
    pylayout_tensor *view = NULL, *packed = NULL;
    pylayout_status st = PYLAYOUT_ERR_NOT_VIEWABLE;
    if (want_copy != 1)
        st = pylayout_view_as_complex(((TensorObject *)in)->tensor, &view);
    if (st == PYLAYOUT_ERR_NOT_VIEWABLE && want_copy != 0) {
        /* Pack: a contiguous copy always admits the view. */
        const DLTensor *dl = ((TensorObject *)in)->dl;
        if (_plext_check_host(dl, "the input") < 0)
            goto done;
        Py_BEGIN_ALLOW_THREADS
        st = pylayout_convert(dl, PYLAYOUT_FORMAT_CONTIGUOUS, &packed);
        Py_END_ALLOW_THREADS
        if (st == PYLAYOUT_OK)
            st = pylayout_view_as_complex(packed, &view);
        _plext_release(packed);
    }
    if (st != PYLAYOUT_OK) {
        _plext_raise_operand_status(st);
        goto done;
    }
    res = _plext_wrap_tensor(state, view); /* the shim gives NumPy input a NumPy view */
done:
    Py_DECREF(in);
    return res;
}

/* Shared by view_as_real and canonicalize: a zero-copy view made by `fn`. */
static PyObject *zero_copy_view(PyObject *module, PyObject *x, const char *name,
                                pylayout_status (*fn)(pylayout_tensor *, pylayout_tensor **))
{
    core_state *state = get_state(module);
    PyObject *in = _plext_import_for_view(state, x, name);
    if (!in)
        return NULL;
    pylayout_tensor *view;
    pylayout_status st = fn(((TensorObject *)in)->tensor, &view);
    Py_DECREF(in);
    if (st != PYLAYOUT_OK)
        return _plext_raise_operand_status(st);
    return _plext_wrap_tensor(state, view);
}

PyObject *_plext_mod_view_as_real(PyObject *module, PyObject *z)
{
    return zero_copy_view(module, z, "view_as_real", pylayout_view_as_real);
}

PyObject *_plext_mod_canonicalize(PyObject *module, PyObject *x)
{
    return zero_copy_view(module, x, "canonicalize", pylayout_tensor_canonicalize);
}

PyObject *_plext_mod_pack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"re", "im", "out", NULL};
    PyObject *re_obj, *im_obj, *out_obj = Py_None, *res = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O:pack_complex", kwlist, &re_obj, &im_obj, &out_obj))
        return NULL;
    core_state *state = get_state(module);
    operand re, im, out; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&re); _plext_operand_init(&im); _plext_operand_init(&out);
    bool has_out = out_obj != Py_None;
    pylayout_tensor *fresh = NULL;
    pylayout_status st;
    /* Phase 1: every operand's Python-level work. */
    if (_plext_operand_take(state, re_obj, &re) < 0 || _plext_operand_take(state, im_obj, &im) < 0 ||
        (has_out && _plext_operand_take(state, out_obj, &out) < 0) || _plext_operand_guard(&re) < 0 ||
        _plext_operand_guard(&im) < 0 || (has_out && _plext_operand_guard(&out) < 0))
        goto done;
    /* Phase 2: the memory. */
    operand *const ops[3] = {&re, &im, &out};
    if (_plext_operands_memory(ops, has_out ? 3 : 2) < 0)
        goto done;
    const DLTensor *dre = re.dl, *dim = im.dl, *dout;
    if (!has_out) {
        DLDataType ct;
        if ((st = pylayout_complex_dtype(dre->dtype, &ct)) != PYLAYOUT_OK) {
            _plext_raise_operand_status(st); /* the core's message: which dtypes pair */
            goto done;
        }
        if (_plext_check_host(dre, "re") < 0)
            goto done;
        if ((st = pylayout_tensor_empty(dre->ndim, dre->shape, ct, PYLAYOUT_FORMAT_CONTIGUOUS, &fresh)) !=
            PYLAYOUT_OK) {
            _plext_raise_status(st);
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
        _plext_raise_operand_status(st);
        goto done;
    }
    /* Memory done: Python may run again. */
    if (has_out) {
        if (_plext_operand_written(state, &out) == 0)
            res = Py_NewRef(out_obj);
    } else {
        res = _plext_export_like(state, re_obj, fresh);
        fresh = NULL;
    }
done:
    _plext_release(fresh);
    _plext_operand_release(&out);
    _plext_operand_release(&im);
    _plext_operand_release(&re);
    return res;
}

/* The pair (re, im) as Python objects, stealing both: pylayout.Tensors when
 * like is NULL, else objects of the kind `like` is (_plext_export_like). */
static PyObject *parts_pair(core_state *state, PyObject *like, pylayout_tensor *re, pylayout_tensor *im)
{
    PyObject *a = like ? _plext_export_like(state, like, re) : _plext_wrap_tensor(state, re);
    if (!a) {
        _plext_release(im);
        return NULL;
    }
    PyObject *b = like ? _plext_export_like(state, like, im) : _plext_wrap_tensor(state, im);
    PyObject *res = b ? PyTuple_Pack(2, a, b) : NULL;
    Py_DECREF(a);
    Py_XDECREF(b);
    return res;
}

/* unpack_complex(z, copy=False): zero-copy views of z's real and imaginary
 * parts, never of torch's memory (rule 2). */
static PyObject *unpack_views(core_state *state, PyObject *z_obj)
{
    PyObject *zin = _plext_import_for_view(state, z_obj, "unpack_complex");
    if (!zin)
        return NULL;
    pylayout_tensor *re = NULL, *im = NULL;
    pylayout_status st = pylayout_complex_parts(((TensorObject *)zin)->tensor, &re, &im);
    Py_DECREF(zin);
    if (st != PYLAYOUT_OK)
        return _plext_raise_operand_status(st);
    return parts_pair(state, NULL, re, im); /* steals both */
}

/* unpack_complex(z, copy=True): z's parts copied into two new tensors of
 * the kind z is. */
static PyObject *unpack_copies(core_state *state, PyObject *z_obj)
{
    operand z; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&z);
    pylayout_tensor *re = NULL, *im = NULL;
    PyObject *res = NULL;
    pylayout_status st;
    operand *const ops[1] = {&z};
    if (_plext_operand_take(state, z_obj, &z) < 0 || _plext_operand_guard(&z) < 0 || _plext_operands_memory(ops, 1) < 0)
        goto done; /* phase 2 from the last call on */
    const DLTensor *dz = z.dl;
    DLDataType rt;
    if ((st = pylayout_real_dtype(dz->dtype, &rt)) != PYLAYOUT_OK) {
        _plext_raise_operand_status(st);
        goto done;
    }
    if (_plext_check_host(dz, "z") < 0)
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
        _plext_raise_operand_status(st);
        goto done;
    }
    _plext_operand_release(&z); /* memory done */
    res = parts_pair(state, z_obj, re, im); /* steals both */
    re = im = NULL;
done:
    _plext_release(re);
    _plext_release(im);
    _plext_operand_release(&z);
    return res;
}

PyObject *_plext_mod_unpack_complex(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"z", "copy", NULL};
    PyObject *z_obj, *copy = Py_True;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:unpack_complex", kwlist, &z_obj, &copy))
        return NULL;
    int want_copy = PyObject_IsTrue(copy);
    if (want_copy < 0)
        return NULL;
    core_state *state = get_state(module);
    return want_copy ? unpack_copies(state, z_obj) : unpack_views(state, z_obj);
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
        _plext_raise_operand_status(st);
    } else {
        const DLTensor *vd;
        int64_t strides[PYLAYOUT_MAX_NDIM];
        pylayout_tensor_dltensor(v, &vd);
        for (int32_t d = 0; d < vd->ndim; d++)
            strides[d] = 2 * vd->strides[d]; /* a complex stride fits int64 twice over: it came from one */
        strides[vd->ndim] = 1;
        res = _plext_int64_tuple(strides, vd->ndim + 1);
    }
    pylayout_tensor_release(v); /* borrowed memory: no deleter, no Python */
    pylayout_tensor_release(t);
    return res;
}

PyObject *_plext_mod_complex_view_strides(PyObject *module, PyObject *x)
{
    return _plext_query(module, x, complex_view_strides_of);
}
