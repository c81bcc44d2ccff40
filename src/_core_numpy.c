/*
 * _core_numpy.c - exact NumPy arrays through NumPy's C ABI.
 *
 * contiguous() of a 1 KB ndarray spent most of its time in the exchange,
 * not in the copy: the array's buffer asked twice (to take it, then again
 * in phase 2), numpy.empty called through Python, and the result's buffer
 * asked for its pointer.  NumPy's C ABI does the same in a few loads and one
 * call.  Every operation's ndarray operands are taken the same way
 * (_plext_numpy_take, _plext_numpy_unchanged: the operand of
 * _core_import.c).  pylayout builds without NumPy, so the ABI is used here
 * without NumPy's headers, through the two things NumPy keeps stable across
 * releases as its ABI (documented in "NumPy C-API", "Array API" and "ABI
 * compatibility"):
 *
 *  - the function table the module numpy._core._multiarray_umath (NumPy 2;
 *    numpy.core.multiarray in NumPy 1) exports as the capsule _ARRAY_API,
 *    whose entries keep their index forever: 0 is
 *    PyArray_GetNDArrayCVersion, 2 is &PyArray_Type, 94 is
 *    PyArray_NewFromDescr;
 *  - the leading fields of an array object and of a dtype, declared below.
 *
 * The table is used only when NumPy reports an ABI version whose layout is
 * the one declared here (1 or 2) and its entry 2 is the very type whose
 * instance is being converted.  Anything else -- another NumPy, a subclass,
 * a dtype that is not NumPy's own for one of its plain numbers (bool, the
 * integers, float16/32/64, complex64/128: so not byte-swapped, with
 * metadata or with fields), unaligned data, empty or 0-d arrays, results
 * over SMALL_COPY_BYTES -- takes the general path (the buffer, or
 * __dlpack__), which gives the same answer.
 *
 * Rule 1 here: the only thing that could run Python is the one-time import
 * of NumPy's module, before any field is read.  contiguous's path then reads
 * the array's fields, makes its result (PyArray_NewFromDescr: NumPy's C),
 * reads the fields again and compares, and copies from the second read with
 * no Python in between.  An operand's fields are read in phase 1 and read
 * again and compared in phase 2, as its buffer was, the array held between.
 * (Making a plain ndarray runs no Python today; the second read is for
 * allocators NumPy lets a user install.)
 */
#include "_core.h"

/* NumPy's npy_intp: the size of a pointer. */
typedef intptr_t np_intp;

/* The leading fields of NumPy's PyArrayObject (PyArrayObject_fields), the
 * same in ABI versions 1 and 2. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    np_intp *dimensions;
    np_intp *strides; /* bytes */
    PyObject *base;
    PyObject *descr;
    int flags;
} np_array;

/* The leading fields of NumPy's PyArray_Descr, the same in ABI versions 1
 * and 2 (which differ after type_num). */
typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind;
    char type;
    char byteorder; /* '=' native, '|' not applicable, '<' little, '>' big */
    char unused;
    int type_num;
} np_descr;

/* NPY_ARRAY_ALIGNED, NPY_ARRAY_WRITEABLE, and the bit NumPy sets on arrays
 * whose writes it warns about (np.broadcast_arrays' results), which its
 * buffer export reports read-only: so does pylayout. */
#define NP_ALIGNED 0x0100u
#define NP_WRITEABLE 0x0400u
#define NP_WARN_ON_WRITE 0x80000000u
/* Table entries. */
enum { NP_GET_VERSION = 0, NP_ARRAY_TYPE = 2, NP_DESCR_FROM_TYPE = 45, NP_NEW_FROM_DESCR = 94 };

typedef unsigned int (*np_version_fn)(void);
typedef PyObject *(*np_descr_from_type_fn)(int type_num);
typedef PyObject *(*np_new_from_descr_fn)(PyTypeObject *, PyObject *descr, int nd, const np_intp *dims,
                                          const np_intp *strides, void *data, int fortran, PyObject *obj);

/* The table, once NumPy's ABI has been checked; NULL with no error set when
 * the ABI path is off, or NumPy's is not one declared here; NULL with an
 * error (KeyboardInterrupt, MemoryError) when looking failed, to be tried
 * again next time. */
static void *const *numpy_api(core_state *state, PyTypeObject *ndarray)
{
    if (state->np_abi_off)
        return NULL;
    if (state->np_api_tried)
        return state->np_api;
    /* an exact ndarray exists, so NumPy is imported: a sys.modules lookup
     * (NumPy 1.25 and older: the second name) */
    PyObject *m = PyImport_ImportModule("numpy._core._multiarray_umath");
    if (!m && PyErr_ExceptionMatches(PyExc_ModuleNotFoundError)) {
        PyErr_Clear();
        m = PyImport_ImportModule("numpy.core._multiarray_umath");
    }
    if (!m && !PyErr_ExceptionMatches(PyExc_ImportError))
        return NULL;
    PyErr_Clear();
    state->np_api_tried = true;
    PyObject *cap = m ? PyObject_GetAttrString(m, "_ARRAY_API") : NULL;
    Py_XDECREF(m);
    void *const *api = cap && PyCapsule_IsValid(cap, NULL) ? PyCapsule_GetPointer(cap, NULL) : NULL;
    PyErr_Clear();
    unsigned int abi = api ? ((np_version_fn)api[NP_GET_VERSION])() >> 24 : 0;
    if ((abi == 1 || abi == 2) && api[NP_ARRAY_TYPE] == (void *)ndarray) {
        state->np_api = api;
        state->np_api_capsule = cap; /* keeps the table's owner alive */
    } else {
        Py_XDECREF(cap);
    }
    return state->np_api;
}

/* DLPack's type for each of NumPy's plain number types, by NumPy's type
 * number (NPY_BOOL = 0 ... NPY_HALF = 23); bits 0 for the others. */
static const DLDataType np_numbers[PLEXT_NP_TYPE_NUMBERS] = {
    [0] = {kDLBool, 8, 1},                            /* NPY_BOOL */
    [1] = {kDLInt, 8, 1},     [2] = {kDLUInt, 8, 1},   /* NPY_BYTE, NPY_UBYTE */
    [3] = {kDLInt, 16, 1},    [4] = {kDLUInt, 16, 1},  /* NPY_SHORT, NPY_USHORT */
    [5] = {kDLInt, 32, 1},    [6] = {kDLUInt, 32, 1},  /* NPY_INT, NPY_UINT */
    [7] = {kDLInt, 8 * sizeof(long), 1},              /* NPY_LONG: C's long */
    [8] = {kDLUInt, 8 * sizeof(long), 1},             /* NPY_ULONG */
    [9] = {kDLInt, 64, 1},    [10] = {kDLUInt, 64, 1}, /* NPY_LONGLONG, NPY_ULONGLONG */
    [11] = {kDLFloat, 32, 1}, [12] = {kDLFloat, 64, 1}, /* NPY_FLOAT, NPY_DOUBLE */
    [14] = {kDLComplex, 64, 1}, [15] = {kDLComplex, 128, 1}, /* NPY_CFLOAT, NPY_CDOUBLE */
    [23] = {kDLFloat, 16, 1},                         /* NPY_HALF */
};

/* DLPack's type for a dtype that is NumPy's own instance for one of its
 * numbers (numpy.dtype('float32') itself): false for every other dtype
 * (byte-swapped, with metadata or fields, long double, datetimes, records,
 * ...), which take the general path.  NumPy's instances are looked up once
 * each and held: then a dtype is known by its address. */
static bool descr_dtype(core_state *state, const np_descr *d, DLDataType *dt)
{
    const unsigned n = (unsigned)d->type_num;
    if (n >= PLEXT_NP_TYPE_NUMBERS || np_numbers[n].bits == 0)
        return false;
    PyObject *own = state->np_dtypes[n];
    if (!own) {
        own = ((np_descr_from_type_fn)state->np_api[NP_DESCR_FROM_TYPE])((int)n); /* NumPy's C: no Python */
        if (!own) {
            PyErr_Clear();
            return false;
        }
        state->np_dtypes[n] = own;
    }
    *dt = np_numbers[n];
    return (PyObject *)d == own;
}

/* An array's fields as a DLTensor over shape and strides (elements), or
 * false for what the general path takes instead. */
static bool read_array(core_state *state, const np_array *a, DLTensor *t, int64_t *shape, int64_t *strides)
{
    DLDataType dt;
    if (a->nd < 1 || a->nd > PYLAYOUT_MAX_NDIM || !((unsigned)a->flags & NP_ALIGNED) ||
        !descr_dtype(state, (const np_descr *)a->descr, &dt))
        return false;
    const int shift = __builtin_ctz(dt.bits / 8); /* every size here is a power of 2: no divisions */
    for (int i = 0; i < a->nd; i++) {
        if (a->dimensions[i] < 1 || (a->strides[i] & ((np_intp)(dt.bits / 8) - 1)) != 0)
            return false;
        shape[i] = a->dimensions[i];
        strides[i] = a->strides[i] >> shift; /* exact: arithmetic shift of a multiple */
    }
    *t = (DLTensor){a->data, {kDLCPU, 0}, a->nd, dt, shape, strides, 0};
    return true;
}

/* Whether a's fields, read again, still describe t: the same memory, with
 * the same dtype, shape and strides. */
static bool still(core_state *state, const np_array *a, const DLTensor *t)
{
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    DLTensor now;
    bool same = read_array(state, a, &now, shape, strides) && now.data == t->data && now.ndim == t->ndim &&
                now.dtype.code == t->dtype.code && now.dtype.bits == t->dtype.bits;
    for (int i = 0; same && i < now.ndim; i++)
        same = now.shape[i] == t->shape[i] && now.strides[i] == t->strides[i];
    return same;
}

static uint64_t access_flags(const np_array *a)
{
    const unsigned f = (unsigned)a->flags;
    return (f & NP_WRITEABLE) && !(f & NP_WARN_ON_WRITE) ? 0 : PYLAYOUT_FLAG_READ_ONLY;
}

int _plext_numpy_take(core_state *state, PyObject *obj, DLTensor *t, int64_t *dims, uint64_t *flags,
                      PyObject **held)
{
    const np_array *a = (const np_array *)obj;
    if (!numpy_api(state, Py_TYPE(obj)))
        return PyErr_Occurred() ? -1 : 0;
    if (!read_array(state, a, t, dims, dims + PYLAYOUT_MAX_NDIM))
        return 0;
    *flags = access_flags(a);
    /* Held until the operand is released, so that NumPy refuses to resize
     * the array meanwhile, as under a buffer export: a copy without the GIL
     * must not lose it to another thread's a.resize(). */
    *held = Py_NewRef(obj);
    return 1;
}

bool _plext_numpy_unchanged(core_state *state, PyObject *obj, const DLTensor *t, uint64_t flags)
{
    const np_array *a = (const np_array *)obj;
    return still(state, a, t) && access_flags(a) == flags;
}

PyObject *_plext_numpy_convert(core_state *state, PyObject *obj, pylayout_format fmt)
{
    if (fmt != PYLAYOUT_FORMAT_CONTIGUOUS && fmt != PYLAYOUT_FORMAT_FORTRAN)
        return NULL;
    void *const *api = numpy_api(state, Py_TYPE(obj));
    if (!api)
        return NULL;
    /* from here no Python runs */
    const np_array *a = (const np_array *)obj;
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    DLTensor src;
    bool already = false;
    if (!read_array(state, a, &src, shape, strides) ||
        pylayout_is_contiguous(&src, fmt, &already) != PYLAYOUT_OK)
        return NULL;
    if (already)
        return Py_NewRef(obj);
    if (!_plext_is_small(&src)) /* pylayout allocates large results (its reuse cache, its retry) */
        return NULL;
    np_intp dims[PYLAYOUT_MAX_NDIM];
    for (int i = 0; i < src.ndim; i++)
        dims[i] = (np_intp)shape[i];
    const int fortran = fmt == PYLAYOUT_FORMAT_FORTRAN;
    PyObject *out = ((np_new_from_descr_fn)api[NP_NEW_FROM_DESCR])( /* steals a reference to the dtype */
        (PyTypeObject *)api[NP_ARRAY_TYPE], Py_NewRef(a->descr), src.ndim, dims, NULL, NULL, fortran, NULL);
    if (!out) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError))
            return NULL;
        PyErr_Clear(); /* the general path allocates, and retries after releasing pylayout's cache */
        return NULL;
    }
    /* phase 2: the array read again, still as it was, and the result */
    int64_t dshape[PYLAYOUT_MAX_NDIM], dstrides[PYLAYOUT_MAX_NDIM];
    DLTensor dst;
    if (!still(state, a, &src) || !read_array(state, (const np_array *)out, &dst, dshape, dstrides)) {
        Py_DECREF(out); /* a new array of numbers: its deallocation runs no Python */
        return NULL;
    }
    pylayout_status st = pylayout_copy(&src, &dst); /* small: with the GIL */
    if (st != PYLAYOUT_OK) {
        Py_DECREF(out);
        return _plext_raise_status(st);
    }
    return out;
}
