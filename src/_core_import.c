/*
 * _core_import.c - the boundary: Python objects in, DLTensors out.
 *
 * Everything that turns a caller's object into memory pylayout may read or
 * write lives here: DLPack capsules, __dlpack__ and its retries, the cache
 * of producer types and their C exchange APIs, the torch guards and
 * refusals, and the two-phase operand that the module functions use.  The
 * rules below are why it is one file: each is kept here, and the module
 * functions only call it.
 */
#include "_core.h"

#include <string.h>

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
 *     under it), so a torch pointer is always read late, never kept.  Nor
 *     does NumPy's, quite: a.resize(..., refcheck=False) frees an array's
 *     memory while a buffer or DLPack export of it is held, so an exact
 *     ndarray, taken through its fields (NumPy's C ABI: _core_numpy.c) or
 *     its buffer, is read again in phase 2 and checked (ndarray_unchanged).
 *     Every other producer's export keeps its memory, so theirs are read in
 *     phase 1.
 *     Another *thread* mutating an operand during a copy is a data race, as
 *     it is for torch's own ops.
 *  2. A result that aliases a torch tensor's memory is a torch view of it:
 *     pylayout/__init__.py sends torch tensors to pylayout.torch's view
 *     functions (as_strided, view_as_real, ...), and the view functions here
 *     (_core_complex.c, through import_for_view) refuse torch tensors rather
 *     than rebuild memory they cannot keep alive.
 *  3. A write into a torch tensor's memory bumps its version counter
 *     (operand_written), so autograd's saved-tensor check sees it.
 *  4. Every size computed from user numbers is checked for overflow (the
 *     buffer export and nbytes in _core_tensor.c; the core validates every
 *     DLTensor it is given).
 */

/* What pylayout knows about a producer type: its DLPack C exchange API (or
 * NULL) and whether it is a torch.Tensor type, whose exchange API exports
 * tensors that torch's own __dlpack__ refuses (see torch_guard). */
typedef struct {
    const DLPackExchangeAPI *api;
    bool is_torch;
} producer_info;

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
    if (api == &_plext_exchange_api && tp != state->TensorType)
        api = NULL;
    unsigned int tag = type_tag(tp, state->str_exchange);
    *e = (producer_entry){tp, tag, api, is_torch};
    info->api = api;
    info->is_torch = is_torch;
    return 0;
}

/* Whether tp is torch.Tensor or a subclass: 1, 0, or -1 with an error. */
int _plext_is_torch_type(core_state *state, PyTypeObject *tp)
{
    producer_info info = {NULL, false};
    if (tp == state->TensorType)
        return 0;
    return producer_of(state, tp, &info) < 0 ? -1 : info.is_torch;
}

const DLPackExchangeAPI *_plext_exchange_api_of(core_state *state, PyTypeObject *tp)
{
    producer_info info;
    return producer_of(state, tp, &info) < 0 ? NULL : info.api;
}

/* bool(r) of a new reference r, released: 1, 0, or -1 with an exception
 * (r NULL: the call that made it failed).  Runs Python (r's __bool__). */
static int truth_of(PyObject *r)
{
    int truth = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return truth;
}

/* bool(getattr(x, name)) and bool(x.method()): truth_of's answers. */
static int attr_is_true(PyObject *x, PyObject *name) { return truth_of(PyObject_GetAttr(x, name)); }
static int method_is_true(PyObject *x, PyObject *method) { return truth_of(PyObject_CallMethodNoArgs(x, method)); }

/* Whether x is a functional tensor (torch's functionalization: torch.func.
 * functionalize, AOTAutograd): a wrapper whose values live in its base
 * and pending updates, not in the memory torch's export points at (NULL,
 * or NULL plus the storage offset: reading it crashed).  1, 0, or -1 with
 * an error.  Runs Python. */
static int torch_is_functional(core_state *state, PyObject *x)
{
    if (!_plext_lazy_attr(&state->is_functional, "torch", "_is_functional_tensor"))
        return -1;
    return truth_of(PyObject_CallOneArg(state->is_functional, x));
}

static const char *const torch_refusals[] = {
    [TORCH_GRAD] = "the tensor requires grad, and passing it through DLPack would cut the autograd graph; use "
                   "pylayout.torch's differentiable conversions, or x.detach() if no gradient should flow",
    [TORCH_FUNCTIONAL] = "the tensor is a functional tensor (torch's functionalization), whose memory does not "
                         "hold its values; call torch's own ops on it, or pylayout's outside the transform",
    [TORCH_CONJ] = "the tensor has torch's conjugate bit set, so its memory holds the unconjugated values; "
                   "call x.resolve_conj() first",
    [TORCH_NEG] = "the tensor has torch's negative bit set, so its memory holds the un-negated values; "
                  "call x.resolve_neg() first",
};

/* Asks torch tensor x the properties in `ask` (TORCH_* bits) that `known`
 * does not hold already, each as torch's __dlpack__ would, and refuses the
 * first one true with BufferError and its fix.  Adds what it asked to
 * *known.  0, or -1 with an error.  Runs Python (a subclass may override
 * any of these): phase 1 only. */
static int torch_refuse(core_state *state, PyObject *x, unsigned ask, unsigned *known)
{
    ask &= ~*known;
    for (unsigned bit = 0; bit < TORCH_CHECKS; bit++) {
        if (!(ask & (1u << bit)))
            continue;
        int truth = bit == TORCH_GRAD         ? attr_is_true(x, state->str_requires_grad)
                    : bit == TORCH_FUNCTIONAL ? torch_is_functional(state, x)
                    : method_is_true(x, bit == TORCH_CONJ ? state->str_is_conj : state->str_is_neg);
        if (truth != 0) {
            if (truth > 0)
                PyErr_SetString(PyExc_BufferError, torch_refusals[bit]);
            return -1;
        }
        *known |= 1u << bit;
    }
    return 0;
}

/* torch's C exchange API exports what torch.Tensor.__dlpack__ refuses:
 * tensors that require grad (whose graph a DLPack round trip would
 * silently cut) and tensors with the conjugate or negative bit set (whose
 * memory holds the un-negated values); and functional tensors, whose
 * exported pointer is garbage.  The guard refuses them the same way, with
 * the fix, in phase 1, all but the conjugate bit: it changes only a complex
 * tensor's values (the conjugate of a real number is itself), and asking
 * x.is_conj() of every tensor cost 70 ns of a 1 us copy_into, so it is
 * asked where phase 2 reads a complex dtype (operands_memory). */
static int torch_guard(core_state *state, PyObject *x, unsigned *known)
{
    return torch_refuse(state, x, TORCH_ALL & ~(1u << TORCH_CONJ), known);
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
    PyObject *exc = PyErr_GetRaisedException_compat();
    PyObject *msg = exc ? PyObject_Str(exc) : NULL;
    PyErr_Format(PyExc_BufferError, "%.200s cannot be exported through DLPack: %S", Py_TYPE(x)->tp_name,
                 msg ? msg : Py_None);
    Py_XDECREF(msg);
    Py_XDECREF(exc);
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

/* --------------------------------------------------------------- capsules */

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
            return _plext_raise_status(st);
        }
    } else if (name && !strcmp(name, LEGACY_NAME)) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
        if (!m || PyCapsule_SetName(capsule, USED_LEGACY_NAME) < 0)
            return NULL;
        st = pylayout_tensor_from_legacy(m, 0, &t);
        if (st != PYLAYOUT_OK) {
            PyCapsule_SetName(capsule, LEGACY_NAME);
            return _plext_raise_status(st);
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
    return _plext_wrap_tensor(state, t);
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
    {
        /* max_version=(1, 0) by vectorcall: no dict to unpack per call */
        PyObject *args[2] = {NULL, state->max_version};
        res = PyObject_Vectorcall(meth, args + 1, 0 | PY_VECTORCALL_ARGUMENTS_OFFSET, state->kwnames_max_version);
    }
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
PyObject *_plext_import_tensor(core_state *state, PyObject *x, PyObject *copy)
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
        unsigned known = 0;
        if (info.is_torch && torch_refuse(state, x, TORCH_ALL, &known) < 0)
            return NULL;
        if (info.api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
            return info.is_torch ? (torch_refused(x), NULL) : exchange_refused(x);
        return _plext_wrap_managed(state, m);
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

PyObject *_plext_lookup_attr(PyObject **slot, const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module);
    *slot = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    return *slot;
}

/* ------------------------------------------------------------- operands */

/* Whether obj is exactly a numpy.ndarray (no subclass), without importing
 * numpy: its type is found by name once (a static type, as numpy's is; a
 * class can take any name, but only C code makes a static type). */
bool _plext_is_ndarray(core_state *state, PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp == state->ndarray_type)
        return true;
    if (state->ndarray_type || PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE) || strcmp(tp->tp_name, "numpy.ndarray"))
        return false;
    state->ndarray_type = (PyTypeObject *)Py_NewRef(tp);
    return true;
}

/* DLPack's type for a buffer's element format: the codes numpy gives its
 * native-order numbers ('?', the C integer codes by their size, 'e', 'f',
 * 'd', 'Zf', 'Zd').  False for every other format (byte-swapped, long
 * double, records, strings). */
static bool buffer_dtype(const char *f, Py_ssize_t itemsize, DLDataType *dt)
{
    if (!f || itemsize < 1 || itemsize > 16)
        return false;
    const uint8_t bits = (uint8_t)(itemsize * 8);
    if (f[0] == 'Z' && (f[1] == 'f' || f[1] == 'd') && f[2] == '\0') {
        *dt = (DLDataType){kDLComplex, bits, 1};
        return itemsize == (f[1] == 'f' ? 8 : 16);
    }
    if (f[0] == '\0' || f[1] != '\0')
        return false;
    switch (f[0]) {
    case '?': *dt = (DLDataType){kDLBool, 8, 1}; return itemsize == 1;
    case 'b': case 'h': case 'i': case 'l': case 'q': *dt = (DLDataType){kDLInt, bits, 1}; return true;
    case 'B': case 'H': case 'I': case 'L': case 'Q': *dt = (DLDataType){kDLUInt, bits, 1}; return true;
    case 'e': *dt = (DLDataType){kDLFloat, 16, 1}; return itemsize == 2;
    case 'f': *dt = (DLDataType){kDLFloat, 32, 1}; return itemsize == 4;
    case 'd': *dt = (DLDataType){kDLFloat, 64, 1}; return itemsize == 8;
    default: return false;
    }
}

/* An exact numpy.ndarray is taken through its fields where NumPy's C ABI
 * is one pylayout knows (_plext_numpy_take), else through its buffer export
 * (here) rather than its __dlpack__: the same memory, described the same
 * way, without a capsule, a deleter or a Tensor object (at 1 KB the
 * exchange was most of a call).
 * The export keeps the array referenced, and resizing it refused, as
 * numpy's DLPack export does; resize(refcheck=False) is not refused, hence
 * the check in phase 2 (ndarray_unchanged).  Returns 1 when
 * taken, 0 when the array goes through __dlpack__ after all (a dtype or
 * strides DLPack does not describe as a buffer does: that path answers or
 * refuses it with its own words), -1 on error. */
static int take_ndarray(operand *op)
{
    Py_buffer *v = &op->view;
    if (PyObject_GetBuffer(op->obj, v, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear(); /* numpy exports no buffer of datetimes: __dlpack__ says what it thinks */
        return 0;
    }
    DLTensor *t = &op->scratch;
    bool ok = v->ndim <= PYLAYOUT_MAX_NDIM && buffer_dtype(v->format, v->itemsize, &t->dtype);
    /* NumPy's buffer gives a contiguous array's size-1 dims C-order strides,
     * not the array's own (which DLPack passes on, and strides queries
     * report): such arrays, and empty ones, keep to __dlpack__. */
    for (int i = 0; ok && i < v->ndim; i++) {
        ok = v->shape[i] > 1 && v->strides[i] % v->itemsize == 0;
        op->dims[i] = v->shape[i];
        op->dims[PYLAYOUT_MAX_NDIM + i] = v->strides[i] / v->itemsize;
    }
    if (!ok) {
        PyBuffer_Release(v); /* sets v->obj to NULL */
        return 0;
    }
    t->data = v->buf;
    t->device = (DLDevice){kDLCPU, 0};
    t->ndim = v->ndim;
    t->shape = op->dims;
    t->strides = op->dims + PYLAYOUT_MAX_NDIM;
    t->byte_offset = 0;
    op->flags = v->readonly ? PYLAYOUT_FLAG_READ_ONLY : 0;
    return 1;
}

int _plext_operand_take(core_state *state, PyObject *obj, operand *op)
{
    memset(op, 0, offsetof(operand, dims));
    op->state = state;
    op->obj = obj;
    if (_plext_is_ndarray(state, obj)) {
        int r = _plext_numpy_take(state, obj, &op->scratch, op->dims, &op->flags, &op->np_array);
        if (r != 0)
            return r < 0 ? -1 : 0;
        r = take_ndarray(op);
        if (r != 0)
            return r < 0 ? -1 : 0;
    }
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
            if (!(op->held = _plext_wrap_managed(state, m)))
                return -1;
            op->flags = ((TensorObject *)op->held)->flags;
        }
        return 0;
    }
    op->held = _plext_import_tensor(state, obj, Py_None);
    if (!op->held)
        return -1;
    op->flags = ((TensorObject *)op->held)->flags;
    return 0;
}

int _plext_operand_guard(operand *op)
{
    return op->is_torch ? torch_guard(op->state, op->obj, &op->known) : 0;
}

/* The one statement of which torch tensors pylayout.torch converts instead
 * of the C core (its autograd-aware custom ops): those that require grad,
 * carry a forward-mode tangent (a dual tensor while a forward-AD level is
 * active), are functional (torch.func.functionalize) or are functorch's
 * other wrappers (vmap, grad).  1, 0, or -1 with an exception; adds to
 * *known (torch_refuse's bits) what it read false.  Runs Python: phase 1
 * only.  The fast paths ask it through operand_route, the shim through
 * _core.torch_route (which adds the device); only torch.compile's
 * is_compiling is asked in Python, where tracing sees its answer.
 * functorch's batched and gradient wrappers have no storage, so torch's
 * export refuses them, and the fast paths route every torch operand it
 * refuses: they need not ask (55 ns per operand), and only `exhaustive`
 * asks is_functorch_wrapped_tensor. */
static int torch_route(core_state *state, PyObject *x, unsigned *known, bool exhaustive)
{
    int route = attr_is_true(x, state->str_requires_grad);
    if (route == 0) {
        *known |= 1u << TORCH_GRAD;
        route = torch_is_functional(state, x);
    }
    if (route != 0)
        return route;
    *known |= 1u << TORCH_FUNCTIONAL;
    if (exhaustive) {
        if (!_plext_lazy_attr(&state->is_wrapped, "torch._C._functorch", "is_functorch_wrapped_tensor"))
            return -1;
        route = truth_of(PyObject_CallOneArg(state->is_wrapped, x));
        if (route != 0)
            return route;
    }
    if (!state->forward_ad && !(state->forward_ad = PyImport_ImportModule("torch.autograd.forward_ad")))
        return -1;
    PyObject *level = PyObject_GetAttr(state->forward_ad, state->str_current_level);
    long lv = level ? PyLong_AsLong(level) : -1;
    Py_XDECREF(level);
    if (lv == -1 && PyErr_Occurred())
        return -1;
    if (lv < 0)
        return 0;
    /* a level is active: route only a tensor that has a tangent at it */
    PyObject *dual = PyObject_CallMethod(state->forward_ad, "unpack_dual", "O", x);
    PyObject *tangent = dual ? PyObject_GetAttrString(dual, "tangent") : NULL;
    Py_XDECREF(dual);
    if (!tangent)
        return -1;
    route = tangent != Py_None;
    Py_DECREF(tangent);
    return route;
}

/* Whether x, a torch tensor, may be on torch's meta device, asked before
 * torch's exchange API, which refuses a meta tensor by throwing a C++
 * error whose backtrace costs about 1 ms.  The question costs 40 ns, a
 * quarter of a query, so a process asks it only once a meta tensor has
 * been seen (torch_metadata): until then the answer is 0, and the first
 * meta tensor pays the exchange's refusal once.  1, 0, or -1 with an
 * error.  Runs Python (torch's getter). */
static int torch_is_meta(core_state *state, PyObject *x)
{
    return state->meta_seen ? attr_is_true(x, state->str_is_meta) : 0;
}

/* Phase 1, Python: torch_route for an operand of a fast path (0 for any
 * other producer), which routes every torch operand phase 2 refuses; 2
 * for a meta tensor that torch_route lets through, which phase 2 would
 * refuse slowly (its metadata: operand_memory(op, false)); the caller
 * reads the device from the DLTensor. */
int _plext_operand_route(operand *op)
{
    if (!op->is_torch)
        return 0;
    int route = torch_route(op->state, op->obj, &op->known, false);
    if (route != 0)
        return route;
    int meta = torch_is_meta(op->state, op->obj);
    return meta > 0 ? 2 : meta;
}

/* The length of one of torch's mode stacks (`depth`, a torch._C
 * function), or -1 with an error. */
static long torch_stack_length(PyObject *depth)
{
    PyObject *r = PyObject_CallNoArgs(depth);
    long n = r ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    return n;
}

/* Whether a conversion of x, a torch tensor that no autograd follows
 * (torch_route read 0, or for a fast path's operand 0 or 2: without the
 * functorch-wrapper test), may run right away, with no autograd.Function
 * and custom op in between (they cost 25-50 us a call, several times
 * torch's own copy of a small tensor on a GPU): x is a torch.Tensor itself,
 * not a subclass nor a functorch wrapper (vmap, grad), and no torch
 * function or dispatch mode is active (a mode must see pylayout.torch's
 * custom ops; `with torch.device(...)` is such a mode too).  Asked only
 * outside torch.compile's tracing.  1, 0, or -1 with an error.  Runs
 * Python (torch's own). */
int _plext_torch_eager(core_state *state, PyObject *x)
{
    if (!_plext_lazy_attr(&state->torch_tensor, "torch", "Tensor") ||
        !_plext_lazy_attr(&state->dispatch_depth, "torch._C", "_len_torch_dispatch_stack") ||
        !_plext_lazy_attr(&state->function_depth, "torch._C", "_len_torch_function_stack") ||
        !_plext_lazy_attr(&state->is_wrapped, "torch._C._functorch", "is_functorch_wrapped_tensor"))
        return -1;
    if ((PyObject *)Py_TYPE(x) != state->torch_tensor)
        return 0;
    long n = torch_stack_length(state->dispatch_depth);
    if (n == 0)
        n = torch_stack_length(state->function_depth);
    if (n != 0)
        return n == -1 && PyErr_Occurred() ? -1 : 0;
    int wrapped = truth_of(PyObject_CallOneArg(state->is_wrapped, x));
    return wrapped < 0 ? -1 : !wrapped;
}

/* torch_route(x), all of it, for the module functions below: 1 or 0; -2
 * for anything but a torch tensor; -1 with an error. */
static int module_torch_route(core_state *state, PyObject *x)
{
    producer_info info = {NULL, false};
    if (!Py_IS_TYPE(x, state->TensorType) && producer_of(state, Py_TYPE(x), &info) < 0)
        return -1;
    if (!info.is_torch)
        return -2;
    unsigned known = 0;
    return torch_route(state, x, &known, true);
}

/* _core.torch_eager(x): torch_route(x, False) is False and torch_eager. */
PyObject *_plext_mod_torch_eager(PyObject *module, PyObject *x)
{
    core_state *state = get_state(module);
    int route = module_torch_route(state, x);
    int eager = route == 0 ? _plext_torch_eager(state, x) : route == -1 ? -1 : 0;
    return eager < 0 ? NULL : PyBool_FromLong(eager);
}

/* _core.torch_route(x, device=True): whether x is a torch tensor that
 * pylayout.torch handles, torch_route's tensors and (with device) those off
 * the CPU (where pylayout decides the layout and torch moves the bytes). */
PyObject *_plext_mod_torch_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "torch_route takes 1 or 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *x = args[0];
    int device = nargs < 2 ? 1 : PyObject_IsTrue(args[1]);
    if (device < 0)
        return NULL;
    core_state *state = get_state(module);
    int route = module_torch_route(state, x);
    if (route == -2)
        Py_RETURN_FALSE;
    if (route == 0 && device) {
        int cpu = attr_is_true(x, state->str_is_cpu);
        route = cpu < 0 ? -1 : !cpu;
    }
    return route < 0 ? NULL : PyBool_FromLong(route);
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
    if (why)
        op->state->meta_seen = true; /* from now on asked first: torch_is_meta */
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
    if (_plext_parse_dtype(dtype, &dt) < 0)
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

static int ndarray_changed(void)
{
    PyErr_SetString(PyExc_BufferError, "a numpy array changed while pylayout was taking the operands (its "
                                       "memory replaced by resize(refcheck=False) or __setstate__, or its "
                                       "shape, strides, dtype or writability set); nothing was read or written");
    return -1;
}

/* Phase 2 for an exact ndarray: whether the memory its phase-1 export
 * described (dl) is still the array's.  Python code run since then (a
 * finaliser, a replaced numpy.empty, another operand's __dlpack__) may have
 * called a.resize(..., refcheck=False) or a.__setstate__(...), which free
 * the memory under any export, so the array is read again: its fields, or
 * numpy's buffer asked again (numpy's C, no Python, on an exact ndarray).
 * Its fields must be those read, dtype included; its buffer's pointer,
 * shape and writability those taken, and for an operand taken through its
 * buffer, its strides and format too.  0, or -1 with BufferError. */
static int ndarray_unchanged(operand *op, const DLTensor *dl)
{
    if (numel_of(dl) == 0)
        return 0; /* no memory is read */
    if (op->np_array) /* taken through NumPy's fields: read them again */
        return _plext_numpy_unchanged(op->state, op->obj, dl, op->flags) ? 0 : ndarray_changed();
    Py_buffer now;
    if (PyObject_GetBuffer(op->obj, &now, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        now.obj = NULL;
    }
    const Py_buffer *was = &op->view;
    bool same = now.obj && now.ndim == dl->ndim && (char *)now.buf == (char *)dl->data + dl->byte_offset &&
                !now.readonly == !(op->flags & PYLAYOUT_FLAG_READ_ONLY);
    for (int i = 0; same && i < now.ndim; i++)
        same = now.shape[i] == dl->shape[i];
    if (same && was->obj) {
        same = now.itemsize == was->itemsize && !strcmp(now.format, was->format);
        for (int i = 0; same && i < now.ndim; i++)
            same = now.strides[i] == was->strides[i];
    }
    if (now.obj)
        PyBuffer_Release(&now); /* the array is still referenced: no finaliser runs */
    return same ? 0 : ndarray_changed();
}

/* Phase 2 for one operand: the DLTensor to use from now on.  For a data
 * operation (for_data; through operands_memory, which asks the conjugate
 * bit) no Python code runs here on success. */
int _plext_operand_memory(operand *op, bool for_data)
{
    if (!op->late) {
        op->dl = op->view.obj || op->np_array ? &op->scratch : ((TensorObject *)op->held)->dl;
        return for_data && _plext_is_ndarray(op->state, op->obj) ? ndarray_unchanged(op, op->dl) : 0;
    }
    if (!for_data && op->is_torch) { /* one operand, metadata only: Python may run */
        int meta = torch_is_meta(op->state, op->obj);
        if (meta != 0)
            return meta < 0 ? -1 : torch_metadata(op);
    }
    if (op->late->dltensor_from_py_object_no_sync(op->obj, &op->scratch) == 0) {
        op->dl = &op->scratch;
        return 0;
    }
    if (!op->is_torch) {
        exchange_refused(op->obj);
        return -1;
    }
    if (!for_data) { /* a metadata _plext_query: meta tensors answer from their sizes and strides */
        PyErr_Clear();
        return torch_metadata(op);
    }
    return torch_refused(op->obj);
}

/* Phase 2 of a data operation, for all of its operands at once: each one's
 * DLTensor, read now (operand_memory).  A complex torch operand is asked
 * its conjugate bit first (the guard leaves it: torch_guard), which runs
 * Python, so every operand is then read again: the pointers used are
 * those read after the last Python code.  0, or -1 with an error; no
 * Python runs after the last read. */
int _plext_operands_memory(operand *const *ops, int n)
{
    for (;;) {
        for (int i = 0; i < n; i++)
            if (_plext_operand_memory(ops[i], true) < 0)
                return -1;
        bool asked = false;
        for (int i = 0; i < n; i++) {
            operand *op = ops[i];
            if (!op->is_torch || op->dl->dtype.code != kDLComplex || (op->known & (1u << TORCH_CONJ)))
                continue;
            if (torch_refuse(op->state, op->obj, 1u << TORCH_CONJ, &op->known) < 0)
                return -1;
            asked = true;
        }
        if (!asked)
            return 0;
    }
}

/* After a write into op's memory: torch's autograd must see it (rule 3). */
int _plext_operand_written(core_state *state, operand *op)
{
    if (!op->is_torch)
        return 0;
    /* torch._C._increment_version, which torch.autograd.graph's public
     * increment_version calls with a tuple of tensors (one Python frame less
     * per write: 0.1 us); the public one where it is missing. */
    if (!_plext_lazy_attr(&state->increment_version, "torch._C", "_increment_version")) {
        PyErr_Clear();
        if (!_plext_lazy_attr(&state->increment_version, "torch.autograd.graph", "increment_version"))
            return -1;
    }
    PyObject *tensors = PyTuple_Pack(1, op->obj); /* both take a tuple of tensors */
    PyObject *r = tensors ? PyObject_CallOneArg(state->increment_version, tensors) : NULL;
    Py_XDECREF(tensors);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

void _plext_operand_release(operand *op)
{
    if (op->view.obj)
        PyBuffer_Release(&op->view);
    Py_CLEAR(op->np_array);
    Py_CLEAR(op->held);
    op->dl = NULL;
}

/* The DLTensor of x for a metadata _plext_query, in op (_plext_release it after use). */
const DLTensor *_plext_query_operand(core_state *state, PyObject *x, operand *op)
{
    if (_plext_operand_take(state, x, op) < 0 || _plext_operand_memory(op, false) < 0)
        return NULL;
    return op->dl;
}

/* A metadata _plext_query of x: `answer` computes the result from its DLTensor
 * (no memory is read, so Python may run afterwards). */
PyObject *_plext_query(PyObject *module, PyObject *x, PyObject *(*answer)(const DLTensor *))
{
    operand op; /* not zero-filled: operand_take sets what is read */
    _plext_operand_init(&op);
    const DLTensor *dl = _plext_query_operand(get_state(module), x, &op);
    PyObject *res = dl ? answer(dl) : NULL;
    _plext_operand_release(&op);
    return res;
}

/* Imports x for a zero-copy view, refusing torch tensors (rule 2): a view
 * rebuilt over torch's memory could not keep torch's storage alive, so
 * pylayout makes those with torch's own view ops (pylayout.torch). */
PyObject *_plext_import_for_view(core_state *state, PyObject *x, const char *fn)
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
    return _plext_import_tensor(state, x, Py_None);
}

/* `wrapped` (a new pylayout.Tensor, stolen) as a NumPy array when `like`
 * is exactly a numpy.ndarray and NumPy has the dtype (not complex32), by
 * numpy.from_dlpack: the shim's _like would do the same one Python call
 * later.  Anything else comes back as it is, for the shim to decide. */
static PyObject *ndarray_like(core_state *state, PyObject *like, PyObject *wrapped)
{
    if (!wrapped || !_plext_is_ndarray(state, like))
        return wrapped;
    const DLDataType dt = ((TensorObject *)wrapped)->dl->dtype;
    if (dt.code == kDLComplex && dt.bits == 32)
        return wrapped;
    PyObject *from_dlpack = _plext_lazy_attr(&state->np_from_dlpack, "numpy", "from_dlpack");
    PyObject *out = from_dlpack ? PyObject_CallOneArg(from_dlpack, wrapped) : NULL;
    Py_DECREF(wrapped);
    return out;
}

/* Wraps a freshly allocated tensor (never one aliasing an input: rule 2) as
 * the kind of object `like` is: through the exchange API of type(like) when
 * it has one, an ndarray for an ndarray (ndarray_like), else a
 * pylayout.Tensor (the Python shim turns that into an ndarray for other
 * NumPy input).  Steals t. */
PyObject *_plext_export_like(core_state *state, PyObject *like, pylayout_tensor *t)
{
    const DLPackExchangeAPI *api =
        Py_IS_TYPE(like, state->TensorType) ? NULL : _plext_exchange_api_of(state, Py_TYPE(like));
    if (PyErr_Occurred()) {
        _plext_release(t);
        return NULL;
    }
    if (!api || !api->managed_tensor_to_py_object_no_sync)
        return ndarray_like(state, like, _plext_wrap_tensor(state, t));
    PyObject *out = _plext_export_through(api, t);
    _plext_release(t);
    return out;
}

/* t handed to another library as its own object, through its exchange API
 * (which must have managed_tensor_to_py_object_no_sync): a versioned export
 * of t, which that object then owns.  t itself is not stolen. */
PyObject *_plext_export_through(const DLPackExchangeAPI *api, pylayout_tensor *t)
{
    DLManagedTensorVersioned *m;
    pylayout_status st = pylayout_tensor_to_versioned(t, &m);
    if (st != PYLAYOUT_OK)
        return _plext_raise_status(st);
    void *out = NULL;
    if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0)
        return NULL;
    return out;
}
