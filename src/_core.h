/*
 * _core.h - private to the extension pylayout._core (src/_core_*.c).
 *
 * What its files share: the module state, the Tensor object, the operand of
 * the two-phase boundary (_core_import.c explains the rules), and the
 * helpers more than one file calls.  Only this header and <pylayout.h>, the
 * public API a C user sees, are included: the extension never reaches into
 * the core's internal.h.
 *
 * Non-static symbols carry the `_plext_` prefix (as the core's carry
 * `_pylayout_`); the extension is linked with hidden visibility, so none of
 * them leaves the shared object: PyInit__core is its only export.
 *
 * Which file holds what:
 *   _core_args.c      Python values <-> core values: argument parsers, statuses to exceptions
 *   _core_tensor.c    the pylayout.Tensor type: getters, repr, buffer protocol, __dlpack__
 *   _core_import.c    the boundary: producers and capsules in, torch guards, operands
 *   _core_exchange.c  pylayout's own DLPack C exchange API (the provider side)
 *   _core_layout.c    module functions: import, layout queries, conversions, copies
 *   _core_complex.c   module functions: complex views, packing and unpacking
 *   _core_numpy.c     exact ndarrays through NumPy's C ABI: operands, contiguous's small results
 *   _core_module.c    configuration functions, docstrings, method table, module init
 */
#ifndef PYLAYOUT_EXT_CORE_H
#define PYLAYOUT_EXT_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

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

/* NumPy's type numbers that _core_numpy.c reads arrays of: NPY_BOOL (0) to
 * NPY_HALF (23). */
#define PLEXT_NP_TYPE_NUMBERS 24

typedef struct {
    PyTypeObject *TensorType;
    PyObject *str_dlpack;        /* "__dlpack__" */
    PyObject *str_exchange;      /* "__dlpack_c_exchange_api__" */
    PyObject *kw_max_version;    /* {"max_version": (1, 0)} */
    PyObject *max_version;       /* (1, 0), the value of kw_max_version, for vectorcalls */
    PyObject *kwnames_max_version; /* ("max_version",) */
    PyObject *str_requires_grad; /* the torch guard's names, interned once: every call asks */
    PyObject *str_is_conj;
    PyObject *str_is_neg;
    PyObject *increment_version; /* torch.autograd.graph.increment_version, once needed */
    PyObject *is_wrapped;        /* torch._C._functorch.is_functorch_wrapped_tensor, once needed */
    PyObject *is_functional;     /* torch._is_functional_tensor, once needed */
    PyObject *forward_ad;        /* torch.autograd.forward_ad, once needed */
    PyObject *torch_tensor;      /* torch.Tensor, once a device conversion asks (torch_eager) */
    PyObject *dispatch_depth;    /* torch._C._len_torch_dispatch_stack, likewise */
    PyObject *function_depth;    /* torch._C._len_torch_function_stack, likewise */
    bool meta_seen;              /* a torch meta tensor was queried: torch_is_meta asks from now on */
    PyObject *str_current_level; /* "_current_level" */
    PyObject *np_from_dlpack;    /* numpy.from_dlpack, once an ndarray result is made */
    PyTypeObject *ndarray_type;  /* numpy.ndarray, once one is seen (operands read without __dlpack__) */
    PyObject *np_empty;          /* numpy.empty, once a dense ndarray result is made */
    void *const *np_api;         /* NumPy's C function table, once checked (_core_numpy.c) */
    PyObject *np_api_capsule;    /* its capsule */
    bool np_api_tried;           /* looked for once */
    bool np_abi_off;             /* _core._numpy_abi(False): the general path only (tests) */
    PyObject *str_dtype;         /* "dtype" */
    PyObject *str_F;             /* "F", numpy.empty's Fortran order */
    PyObject *str_contiguous;    /* "contiguous", the default format, as Python's literal is interned */
    PyObject *str_is_cpu;        /* "is_cpu" */
    PyObject *str_is_meta;       /* "is_meta" */
    PyObject *torch_compiler;    /* the torch.compiler module, once a torch tensor is seen */
    PyObject *str_compiling_flag; /* "_is_compiling_flag", what its is_compiling() returns */
    /* pylayout's Python halves (_core._set_python_halves): contiguous and
     * copy_into whole (for keyword calls), each one's route after the fast
     * path, and _like (a result as the caller's kind) */
    PyObject *py_contiguous, *py_contiguous_route, *py_copy_into, *py_copy_into_route, *py_like;
    /* pylayout.torch's _on_device(x, strides), once it is imported
     * (_core._set_device_copy): a device tensor's conversion, by torch */
    PyObject *py_on_device;
    producer_entry producers[PRODUCER_SLOTS];
    PyObject *np_dtypes[PLEXT_NP_TYPE_NUMBERS]; /* NumPy's own dtype per number type (_core_numpy.c) */
} core_state;

extern struct PyModuleDef _plext_module_def;

static inline core_state *get_state(PyObject *module)
{
    return (core_state *)PyModule_GetState(module);
}

/* The current exception as one object (PEP 3134 style), on every Python. */
#if PY_VERSION_HEX >= 0x030C0000
#define PyErr_GetRaisedException_compat PyErr_GetRaisedException
#define PyErr_SetRaisedException_compat PyErr_SetRaisedException
#else
static inline PyObject *PyErr_GetRaisedException_compat(void)
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

static inline void PyErr_SetRaisedException_compat(PyObject *exc)
{
    if (!exc) {
        PyErr_Clear();
        return;
    }
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}
#endif

/* DLPack's capsule names. */
#define VERSIONED_NAME "dltensor_versioned"
#define USED_VERSIONED_NAME "used_dltensor_versioned"
#define LEGACY_NAME "dltensor"
#define USED_LEGACY_NAME "used_dltensor"
#define EXCHANGE_NAME "dlpack_exchange_api"

/* ------------------------------------------- core values, never failing */

static inline const char *format_name(pylayout_format fmt)
{
    const char *name = "?";
    pylayout_format_name(fmt, &name);
    return name;
}

static inline const char *dtype_name_or(DLDataType dt, const char *fallback)
{
    const char *name = NULL;
    return pylayout_dtype_name(dt, &name) == PYLAYOUT_OK ? name : fallback;
}

/* Bytes per element of a tensor's dtype: every pylayout tensor has a
 * supported dtype, so this never fails for one. */
static inline size_t itemsize_of(DLDataType dt)
{
    size_t n = 0;
    pylayout_dtype_itemsize(dt, &n);
    return n;
}

static inline bool is_host(DLDevice device)
{
    bool host = false;
    pylayout_device_is_host(device, &host);
    return host;
}

static inline const char *device_name_or(int32_t device_type, const char *fallback)
{
    const char *name = NULL;
    return pylayout_device_name(device_type, &name) == PYLAYOUT_OK ? name : fallback;
}

static inline int64_t numel_of(const DLTensor *dl)
{
    int64_t n = 1;
    for (int32_t d = 0; d < dl->ndim; d++)
        n *= dl->shape[d];
    return n;
}

/* Copies of at most this many bytes run with the GIL held: releasing and
 * taking it back (a mutex and a condition variable each way) costs more than
 * such a copy, and holding it a few microseconds delays no other thread. */
#define SMALL_COPY_BYTES ((int64_t)32 * 1024)

/* Whether dl's elements span at most SMALL_COPY_BYTES, counted with every
 * product overflow-checked (dl may not be validated yet: rule 4). */
static inline bool _plext_is_small(const DLTensor *dl)
{
    int64_t n = (int64_t)itemsize_of(dl->dtype);
    if (n == 0)
        n = 1;
    for (int32_t d = 0; d < dl->ndim; d++) {
        if (dl->shape[d] <= 0)
            return true; /* empty, or invalid: the core refuses it without copying */
        if (__builtin_mul_overflow(n, dl->shape[d], &n) || n > SMALL_COPY_BYTES)
            return false;
    }
    return true;
}

/* ------------------------------------------------ _core_args.c: arguments */

/* torch.preserve_format: keep a dense tensor as it is, else copy it in its
 * own stride order (pylayout_like_order: torch's meaning for clone and
 * empty_like).  Not a pylayout_format: only the functions that take it know it. */
#define FORMAT_PRESERVE ((pylayout_format)-1)

PyObject *_plext_raise_status(pylayout_status st);
PyObject *_plext_raise_operand_status(pylayout_status st);
int _plext_parse_format(PyObject *obj, pylayout_format *fmt);
int _plext_parse_format_args(PyObject *format, PyObject *memory_format, pylayout_format *fmt, bool allow_preserve);
int _plext_parse_copy(PyObject *copy, int *want);
int _plext_parse_dtype(PyObject *obj, DLDataType *dt);
int _plext_parse_int64_seq(PyObject *seq, const char *what, int64_t *out, int32_t *n);
int _plext_parse_order(PyObject *seq, int32_t *order, int32_t *n);
int _plext_parse_device(PyObject *obj, DLDevice *dev, int *given);
PyObject *_plext_int64_tuple(const int64_t *v, int32_t n);
int _plext_check_host(const DLTensor *dl, const char *what);

/* ---------------------------------------------- _core_tensor.c: the type */

typedef struct {
    PyObject_HEAD
    pylayout_tensor *tensor;
    const DLTensor *dl; /* the tensor's own DLTensor, cached */
    uint64_t flags;
} TensorObject;

extern PyType_Spec _plext_tensor_spec;

void _plext_release(pylayout_tensor *t);
PyObject *_plext_wrap_tensor(core_state *state, pylayout_tensor *t);
PyObject *_plext_wrap_managed(core_state *state, DLManagedTensorVersioned *m);
pylayout_tensor *_plext_copy_tensor(const DLTensor *src);
bool _plext_is_our_tensor(PyObject *obj);

/* -------------------------------------------- _core_import.c: the boundary */

/* What a torch tensor is asked before its memory is read, as bits of a
 * mask: requires_grad, functional, and the conjugate and negative bits.
 * A true answer routes it to pylayout.torch or refuses it (torch_guard). */
enum { TORCH_GRAD, TORCH_FUNCTIONAL, TORCH_CONJ, TORCH_NEG, TORCH_CHECKS };
#define TORCH_ALL ((1u << TORCH_CHECKS) - 1)

/* One operand of an operation, taken in the order rule 1 asks for:
 *   operand_init    before anything: an operand release may be given;
 *   operand_take    phase 1, Python: imports the producer (its __dlpack__,
 *                   its buffer for an exact numpy.ndarray, or nothing yet
 *                   for a torch tensor): the metadata to decide with;
 *   operand_guard   phase 1, Python: torch's guards, before data is read;
 *   operands_memory phase 2, all of an operation's operands: reads the
 *                   DLTensors to use now (a torch tensor's afresh, an
 *                   ndarray's checked afresh), asking a complex torch
 *                   tensor its conjugate bit first; no Python runs after
 *                   (operand_memory: one operand's, for metadata);
 *   operand_written after the memory is done: rule 3;
 *   operand_release last: may run producer deleters, hence Python. */
typedef struct {
    core_state *state;             /* the module's, for its interned names */
    PyObject *obj;                 /* the caller's object (borrowed) */
    PyObject *held;                /* a pylayout.Tensor that keeps the memory alive, or NULL */
    const DLPackExchangeAPI *late; /* read the DLTensor through this in phase 2 */
    bool is_torch;
    bool meta_only;                /* a torch tensor described from its Python metadata */
    unsigned known;                /* TORCH_* properties read false already: not asked again */
    uint64_t flags;
    DLTensor scratch;
    const DLTensor *dl;            /* valid from operand_memory until operand_release */
    Py_buffer view;                /* an exact ndarray's buffer export (view.obj set), held to release */
    PyObject *np_array;            /* or the array itself, held, where its fields were read (NumPy's C ABI) */
    int64_t dims[2 * PYLAYOUT_MAX_NDIM];
} operand;

/* Makes op safe to release before it is taken (not a zero fill: dims stay). */
static inline void _plext_operand_init(operand *op)
{
    op->held = NULL;
    op->view.obj = NULL;
    op->np_array = NULL;
    op->dl = NULL;
}

PyObject *_plext_lookup_attr(PyObject **slot, const char *module, const char *name);

/* *slot, looked up on first use as module.name (the module imported then):
 * the numpy and torch callables pylayout calls never make either a
 * dependency to build or import.  Borrowed; NULL with an error. */
static inline PyObject *_plext_lazy_attr(PyObject **slot, const char *module, const char *name)
{
    return *slot ? *slot : _plext_lookup_attr(slot, module, name);
}
bool _plext_is_ndarray(core_state *state, PyObject *obj);
int _plext_is_torch_type(core_state *state, PyTypeObject *tp);
int _plext_operand_take(core_state *state, PyObject *obj, operand *op);
int _plext_operand_guard(operand *op);
int _plext_operand_route(operand *op);
int _plext_torch_eager(core_state *state, PyObject *x);
int _plext_operand_memory(operand *op, bool for_data);
int _plext_operands_memory(operand *const *ops, int n);
int _plext_operand_written(core_state *state, operand *op);
void _plext_operand_release(operand *op);
const DLTensor *_plext_query_operand(core_state *state, PyObject *x, operand *op);
PyObject *_plext_query(PyObject *module, PyObject *x, PyObject *(*answer)(const DLTensor *));

const DLPackExchangeAPI *_plext_exchange_api_of(core_state *state, PyTypeObject *tp);
PyObject *_plext_import_tensor(core_state *state, PyObject *x, PyObject *copy);
PyObject *_plext_import_for_view(core_state *state, PyObject *x, const char *fn);
PyObject *_plext_export_like(core_state *state, PyObject *like, pylayout_tensor *t);
PyObject *_plext_export_through(const DLPackExchangeAPI *api, pylayout_tensor *t);

/* ------------------------------------ _core_numpy.c: NumPy's C ABI */

/* contiguous(x, fmt) of an exact ndarray x through NumPy's C ABI: the
 * result (x itself when already in fmt), or NULL with no error set where
 * the general path must answer, or NULL with an error. */
PyObject *_plext_numpy_convert(core_state *state, PyObject *obj, pylayout_format fmt);
/* Phase 1 for an exact ndarray: its fields as *t over dims (shape, then
 * strides at dims + PYLAYOUT_MAX_NDIM), its writability, and a reference to
 * the array in *held.  1 when taken, 0 where its buffer or __dlpack__ must
 * take it, -1 with an error. */
int _plext_numpy_take(core_state *state, PyObject *obj, DLTensor *t, int64_t *dims, uint64_t *flags,
                      PyObject **held);
/* Phase 2: whether obj's fields still describe *t and flags. */
bool _plext_numpy_unchanged(core_state *state, PyObject *obj, const DLTensor *t, uint64_t flags);

/* ----------------------------------------- _core_exchange.c: our C API */

extern const DLPackExchangeAPI _plext_exchange_api;

/* ---------------------------------- module functions (the method table) */

/* _core_layout.c */
PyObject *_plext_mod_from_dlpack(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_is_contiguous(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_suggest_format(PyObject *module, PyObject *x);
PyObject *_plext_mod_is_dense(PyObject *module, PyObject *x);
PyObject *_plext_mod_empty(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_convert(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_convert_or_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *_plext_mod_contiguous(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *_plext_mod_to_order(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_copy_into(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_copy_into_or_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *_plext_mod_copy_into_front(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *_plext_mod_canonical_strides(PyObject *module, PyObject *x);
PyObject *_plext_mod_format_strides(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_order_strides(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_to_type(PyObject *module, PyObject *args);
PyObject *_plext_mod_torch_route(PyObject *module, PyObject *const *args, Py_ssize_t nargs); /* _core_import.c */
PyObject *_plext_mod_torch_eager(PyObject *module, PyObject *x);                            /* _core_import.c */

/* _core_complex.c */
PyObject *_plext_mod_view_as_complex(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_view_as_real(PyObject *module, PyObject *z);
PyObject *_plext_mod_canonicalize(PyObject *module, PyObject *x);
PyObject *_plext_mod_pack_complex(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_unpack_complex(PyObject *module, PyObject *args, PyObject *kwds);
PyObject *_plext_mod_complex_view_strides(PyObject *module, PyObject *x);

#endif /* PYLAYOUT_EXT_CORE_H */
