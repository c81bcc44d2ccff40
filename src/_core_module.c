/*
 * _core_module.c - the module pylayout._core: configuration functions,
 * docstrings, the method table and initialisation.
 *
 * Multi-phase initialisation (PEP 489); all state lives in module state
 * (core_state, _core.h).  The other module functions live by theme in
 * _core_layout.c and _core_complex.c; their docstrings are here, next to
 * the table, so the module's Python surface reads in one place.
 */
#include "_core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ configuration */

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
        return _plext_raise_status(st);
    if (warn && PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                 "pylayout.set_num_threads(%ld) asks for more threads than this process can run at "
                                 "once here (%d: the CPUs in its affinity mask, at most OMP_THREAD_LIMIT); "
                                 "copies use %d",
                                 v, machine, machine) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* A count the core reports through an out parameter (calls that cannot
 * fail), as a Python int. */
static PyObject *count_of(pylayout_status (*report)(int *), int fallback)
{
    int n = fallback;
    report(&n);
    return PyLong_FromLong(n);
}

/* Test hook: the threads the calling thread's last copy was entitled to. */
static PyObject *mod_last_copy_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return count_of(pylayout_last_copy_threads, 0);
}

/* Test hook: whether exact ndarrays may be read through NumPy's C ABI
 * (_core_numpy.c), so tests run both it and the general path; returns
 * whether it is in use now, after the switch. */
static PyObject *mod_numpy_abi(PyObject *module, PyObject *on)
{
    core_state *state = get_state(module);
    if (on != Py_None) {
        int v = PyObject_IsTrue(on);
        if (v < 0)
            return NULL;
        state->np_abi_off = !v;
    }
    return PyBool_FromLong(!state->np_abi_off && state->np_api != NULL);
}

/* Set in a child made by fork(), and in its children.  libgomp hangs in a
 * forked child's first OpenMP region once the forking thread had run one
 * (torch's ops run theirs on the caller's thread), so _memcpy, which opens
 * its region on the calling thread, copies on one thread there.  pylayout's
 * own copies handle fork in threads.c. */
static atomic_bool forked;
static void note_fork_in_child(void) { atomic_store(&forked, true); }
static void register_fork_note(void) { (void)pthread_atfork(NULL, NULL, note_fork_in_child); }
static pthread_once_t fork_note_once = PTHREAD_ONCE_INIT;

/* The benchmark's reference (pylayout._bench.Memcpy): one memcpy of src's
 * bytes into dst, cut at 64-byte boundaries into `threads` slices that an
 * OpenMP team copies at once, with the GIL released.  Python threads each
 * calling np.copyto on a slice, the reference before this, kept only about
 * 3 of 16 cores busy on a lent 16-core machine: they queue for the GIL.
 * Returns the CPU seconds the team's threads spent, together. */
static PyObject *mod_memcpy(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer d, s;
    int threads;
    if (!PyArg_ParseTuple(args, "w*y*i:_memcpy", &d, &s, &threads))
        return NULL;
    PyObject *result = NULL;
    const char *sp = s.buf;
    char *dp = d.buf;
    const Py_ssize_t len = s.len;
    if (d.len != len)
        PyErr_Format(PyExc_ValueError, "_memcpy needs buffers of one size, got %zd and %zd bytes", d.len, len);
    else if (threads < 1 || threads > 4096)
        PyErr_SetString(PyExc_ValueError, "_memcpy needs 1 <= threads <= 4096");
    else if (len > 0 && dp < sp + len && sp < dp + len)
        PyErr_SetString(PyExc_ValueError, "_memcpy needs buffers that do not overlap");
    else {
        double cpu = 0.0;
        Py_ssize_t step = (len + threads - 1) / threads;
        step = len >= 64 * (Py_ssize_t)threads ? (step + 63) / 64 * 64 : step;
        const int team = atomic_load(&forked) ? 1 : threads;
        Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel num_threads(team) reduction(+ : cpu) if (team > 1)
#else
        (void)team;
#endif
        {
#ifdef _OPENMP
            const Py_ssize_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            const Py_ssize_t t = 0, nt = 1;
#endif
            struct timespec c0, c1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            /* with fewer threads than asked, each takes its share of the slices */
            for (Py_ssize_t lo = t * step; lo < len; lo += nt * step)
                memcpy(dp + lo, sp + lo, (size_t)(len - lo < step ? len - lo : step));
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            cpu += (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        }
        Py_END_ALLOW_THREADS
        result = PyFloat_FromDouble(cpu);
    }
    PyBuffer_Release(&d);
    PyBuffer_Release(&s);
    return result;
}

/* pylayout's __init__ installs the Python halves of contiguous and
 * copy_into (see _plext_mod_contiguous): callables, held for the module's
 * life. */
static PyObject *mod_set_python_halves(PyObject *module, PyObject *args)
{
    core_state *state = get_state(module);
    PyObject *fn[5];
    if (!PyArg_ParseTuple(args, "OOOOO:_set_python_halves", &fn[0], &fn[1], &fn[2], &fn[3], &fn[4]))
        return NULL;
    for (int i = 0; i < 5; i++)
        if (!PyCallable_Check(fn[i])) {
            PyErr_SetString(PyExc_TypeError, "_set_python_halves takes five callables");
            return NULL;
        }
    Py_XSETREF(state->py_contiguous, Py_NewRef(fn[0]));
    Py_XSETREF(state->py_contiguous_route, Py_NewRef(fn[1]));
    Py_XSETREF(state->py_copy_into, Py_NewRef(fn[2]));
    Py_XSETREF(state->py_copy_into_route, Py_NewRef(fn[3]));
    Py_XSETREF(state->py_like, Py_NewRef(fn[4]));
    Py_RETURN_NONE;
}

static PyObject *mod_set_device_copy(PyObject *module, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_device_copy takes a callable");
        return NULL;
    }
    core_state *state = get_state(module);
    Py_XSETREF(state->py_on_device, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *mod_get_num_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return count_of(pylayout_get_num_threads, 1);
}

static PyObject *mod_set_cache_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    pylayout_status st = pylayout_set_cache_limit((int64_t)v);
    if (st != PYLAYOUT_OK)
        return _plext_raise_status(st);
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

PyDoc_STRVAR(convert_or_route_doc,
"convert_or_route($module, x, format, /)\n--\n\n"
"pylayout.contiguous's fast path: contiguous(x, format), or NotImplemented\n"
"when x is a torch tensor that pylayout.torch must convert instead (it\n"
"requires grad, carries a forward-mode tangent, is a functorch wrapper, or\n"
"lives off the CPU).  Positional only, no copy=: one call's work is kept\n"
"to what a 1 KB conversion needs.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.convert_or_route(pl.from_dlpack(np.zeros((2, 3)).T), 'contiguous').strides\n"
"(2, 1)");

PyDoc_STRVAR(copy_into_or_route_doc,
"copy_into_or_route($module, dst, src, /)\n--\n\n"
"pylayout.copy_into's fast path: copy_into(dst, src), or NotImplemented\n"
"(before any memory is read) when either is a torch tensor that\n"
"pylayout.torch must handle (see torch_route).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> out = np.zeros((3, 2))\n"
">>> pl._core.copy_into_or_route(out.T, np.ones((2, 3))) is not NotImplemented, float(out.sum())\n"
"(True, 6.0)");

PyDoc_STRVAR(torch_route_doc,
"torch_route($module, x, device=True, /)\n--\n\n"
"Whether x is a torch tensor that pylayout.torch converts instead of the C\n"
"core: it requires grad, carries a forward-mode tangent, is functional or a\n"
"functorch wrapper (vmap, grad), or (when `device`) lives off the CPU.\n"
"False for anything else.  The one statement of that rule; pylayout adds\n"
"only torch.compile's tracing.  With device=False: whether x needs\n"
"autograd's view of a conversion (pylayout.torch's custom ops).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.torch_route(np.zeros(3))\n"
"False");

PyDoc_STRVAR(contiguous_doc,
"contiguous($module, /, x, format='contiguous', *, memory_format=None, copy=None)\n--\n\n"
"Return `x` dense in `format`, copying only if it is not already.\n"
"\n"
"`format` is \"contiguous\" (or \"C\"), \"channels_last\" (4-D),\n"
"\"channels_last_3d\" (5-D), \"fortran\" (or \"F\"), or one of torch's\n"
"memory_format objects, also as torch's keyword ``memory_format=``;\n"
"``torch.preserve_format`` keeps a dense tensor as it is and otherwise\n"
"copies it in its own stride order, as torch's ``clone`` does.  When `x`\n"
"already satisfies the format, `x` itself comes back (no copy).  Otherwise\n"
"a cache-blocked, parallel copy fills a new tensor of the same kind as `x`:\n"
"a torch.Tensor for a torch tensor, an ndarray for a NumPy array (a NumPy\n"
"subclass such as np.matrix comes back as a plain ndarray), a\n"
"pylayout.Tensor for any other DLPack producer.  ``copy`` has the Array\n"
"API's meaning: None copies only if needed, True always returns a new\n"
"tensor, False raises ValueError if a copy is needed.\n"
"\n"
">>> import numpy as np, pylayout as pl\n"
">>> a = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)\n"
">>> c = pl.contiguous(a)\n"
">>> type(c).__name__, c.flags.c_contiguous, bool((c == a).all())\n"
"('ndarray', True, True)\n"
">>> pl.contiguous(c) is c\n"
"True");

PyDoc_STRVAR(to_format_doc,
"to_format($module, /, x, format='contiguous', *, memory_format=None, copy=None)\n--\n\n"
"The C core's half of pylayout.contiguous (which see), with no route to\n"
"pylayout.torch: x itself when already in `format`, else a converted copy\n"
"of the same kind.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.to_format(pl.from_dlpack(np.zeros((2, 3)).T)).strides\n"
"(2, 1)");

PyDoc_STRVAR(set_python_halves_doc,
"_set_python_halves($module, contiguous, contiguous_route, copy_into, copy_into_route, like, /)\n--\n\n"
"pylayout's __init__ hands over the Python halves that pylayout.contiguous\n"
"and pylayout.copy_into call: each whole function (for keyword calls) and\n"
"its route after the fast path, and _like.");

PyDoc_STRVAR(set_device_copy_doc,
"_set_device_copy($module, on_device, /)\n--\n\n"
"pylayout.torch hands over on_device(x, strides): a new tensor on x's\n"
"device with those strides and x's values, made by torch.  pylayout.contiguous\n"
"calls it for a plain torch tensor off the CPU (see torch_eager).");

PyDoc_STRVAR(torch_eager_doc,
"torch_eager($module, x, /)\n--\n\n"
"Whether a conversion of x may run right away, with no autograd.Function\n"
"or custom op in between: x is a torch.Tensor itself (not a subclass) that\n"
"no autograd mode or transform follows (torch_route(x, False) is False),\n"
"and no torch function or dispatch mode is active (a mode must see\n"
"pylayout.torch's custom ops).  False for anything but a torch tensor.  The\n"
"one statement of that rule, asked only outside torch.compile's tracing.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.torch_eager(np.zeros(3))\n"
"False");

PyDoc_STRVAR(to_order_doc,
"to_order($module, /, x, order, *, copy=None)\n--\n\n"
"The C half of pylayout.to_order (which see).\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> pl._core.to_order(pl.from_dlpack(np.zeros((2, 3))), (1, 0)).strides\n"
"(1, 2)");

PyDoc_STRVAR(copy_into_doc,
"copy_into($module, /, dst, src)\n--\n\n"
"Copy every element of `src` into `dst` (any strides) and return `dst`.\n"
"\n"
"Shapes and element sizes must match; `src` may broadcast (stride 0).\n"
"Raises ValueError, without writing anything, if `dst` is read-only,\n"
"overlaps itself, shares a byte with `src`, or does not match.  Views of\n"
"one buffer whose elements interleave without sharing a byte copy, as\n"
"with torch and NumPy.\n"
"\n"
">>> import numpy as np, pylayout as pl\n"
">>> out = np.zeros((3, 2), dtype=np.float64)\n"
">>> _ = pl.copy_into(out.T, np.ones((2, 3)))\n"
">>> float(out.sum())\n"
"6.0\n"
">>> x = np.arange(6.0).reshape(3, 2)\n"
">>> _ = pl.copy_into(x[:, 1], x[:, 0])  # one column into the next\n"
">>> x.tolist()\n"
"[[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]");

PyDoc_STRVAR(copy_core_doc,
"copy_core($module, /, dst, src)\n--\n\n"
"The C core's half of pylayout.copy_into (which see), with no route to\n"
"pylayout.torch: copies src into dst, same shape and dtype, any strides;\n"
"returns dst.\n\n"
">>> import numpy as np, pylayout as pl\n"
">>> out = np.zeros((2, 2))\n"
">>> pl._core.copy_core(out, np.eye(2)) is out\n"
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
"dtype('complex128')");

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

PyDoc_STRVAR(memcpy_doc,
"_memcpy($module, dst, src, threads, /)\n--\n\n"
"The benchmark's memcpy reference: copy src's bytes into dst, cut into\n"
"`threads` slices an OpenMP team copies at once, without the GIL.  Returns\n"
"the team's CPU seconds, together.  A forked child copies on one thread:\n"
"libgomp hangs in a child's first region once its parent had run one.\n\n"
">>> import pylayout as pl\n"
">>> dst = bytearray(4); _ = pl._core._memcpy(dst, b'abcd', 2); bytes(dst)\n"
"b'abcd'");

PyDoc_STRVAR(last_copy_threads_doc,
"_last_copy_threads($module, /)\n--\n\n"
"The number of threads the calling thread's last copy was entitled to: a\n"
"test hook for the thread-count rules (docs/reliability.md), never a timing.");

PyDoc_STRVAR(numpy_abi_doc,
"_numpy_abi($module, on, /)\n--\n\n"
"Test hook: True lets pylayout read exact ndarrays through NumPy's C ABI (the\n"
"default; contiguous() of a small one also makes its result there), False\n"
"sends them the general way (their buffer), None changes nothing.  Returns\n"
"whether the ABI is in use: False until pylayout has been given an ndarray.");

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
    KW_METHOD(from_dlpack, _plext_mod_from_dlpack),
    KW_METHOD(is_contiguous, _plext_mod_is_contiguous),
    {"suggest_format", _plext_mod_suggest_format, METH_O, suggest_format_doc},
    {"is_dense", _plext_mod_is_dense, METH_O, is_dense_doc},
    KW_METHOD(empty, _plext_mod_empty),
    {"contiguous", (PyCFunction)(void (*)(void))_plext_mod_contiguous, METH_FASTCALL | METH_KEYWORDS,
     contiguous_doc},
    KW_METHOD(to_format, _plext_mod_convert),
    {"_set_python_halves", mod_set_python_halves, METH_VARARGS, set_python_halves_doc},
    {"copy_into_or_route", (PyCFunction)(void (*)(void))_plext_mod_copy_into_or_route, METH_FASTCALL,
     copy_into_or_route_doc},
    {"convert_or_route", (PyCFunction)(void (*)(void))_plext_mod_convert_or_route, METH_FASTCALL, convert_or_route_doc},
    {"torch_route", (PyCFunction)(void (*)(void))_plext_mod_torch_route, METH_FASTCALL, torch_route_doc},
    {"torch_eager", _plext_mod_torch_eager, METH_O, torch_eager_doc},
    {"_set_device_copy", mod_set_device_copy, METH_O, set_device_copy_doc},
    KW_METHOD(to_order, _plext_mod_to_order),
    {"copy_into", (PyCFunction)(void (*)(void))_plext_mod_copy_into_front, METH_FASTCALL | METH_KEYWORDS,
     copy_into_doc},
    KW_METHOD(copy_core, _plext_mod_copy_into),
    KW_METHOD(view_as_complex, _plext_mod_view_as_complex),
    {"view_as_real", _plext_mod_view_as_real, METH_O, view_as_real_doc},
    {"canonicalize", _plext_mod_canonicalize, METH_O, canonicalize_doc},
    KW_METHOD(pack_complex, _plext_mod_pack_complex),
    KW_METHOD(unpack_complex, _plext_mod_unpack_complex),
    {"complex_view_strides", _plext_mod_complex_view_strides, METH_O, complex_view_strides_doc},
    {"canonical_strides", _plext_mod_canonical_strides, METH_O, canonical_strides_doc},
    KW_METHOD(format_strides, _plext_mod_format_strides),
    KW_METHOD(order_strides, _plext_mod_order_strides),
    {"set_num_threads", mod_set_num_threads, METH_O, set_num_threads_doc},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS, get_num_threads_doc},
    {"_last_copy_threads", mod_last_copy_threads, METH_NOARGS, last_copy_threads_doc},
    {"_numpy_abi", mod_numpy_abi, METH_O, numpy_abi_doc},
    {"_memcpy", mod_memcpy, METH_VARARGS, memcpy_doc},
    {"set_cache_limit", mod_set_cache_limit, METH_O, set_cache_limit_doc},
    {"cache_info", mod_cache_info, METH_NOARGS, cache_info_doc},
    {"build_info", mod_build_info, METH_NOARGS, build_info_doc},
    {"_to_type", _plext_mod_to_type, METH_VARARGS, to_type_doc},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ module init */

static int module_exec(PyObject *module)
{
    core_state *state = get_state(module);
    PyObject *api = NULL, *dlpack_version = NULL;
    int rc = -1;
    pthread_once(&fork_note_once, register_fork_note);
    state->TensorType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &_plext_tensor_spec, NULL);
    if (!state->TensorType || PyModule_AddType(module, state->TensorType) < 0)
        goto done;
    /* The type is immutable, so its one class attribute goes straight into
     * its dict while it is set up (what the C API docs ask of extensions
     * defining their own types, under PyType_GetDict), and the type's
     * attribute cache is told. */
    api = PyCapsule_New((void *)&_plext_exchange_api, EXCHANGE_NAME, NULL);
    if (!api || PyDict_SetItemString(state->TensorType->tp_dict, "__dlpack_c_exchange_api__", api) < 0)
        goto done;
    PyType_Modified(state->TensorType);
    state->str_dlpack = PyUnicode_InternFromString("__dlpack__");
    state->str_exchange = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    state->kw_max_version = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
    state->max_version = state->kw_max_version ? Py_XNewRef(PyDict_GetItemString(state->kw_max_version, "max_version")) : NULL;
    state->kwnames_max_version = Py_BuildValue("(s)", "max_version");
    state->str_requires_grad = PyUnicode_InternFromString("requires_grad");
    state->str_is_conj = PyUnicode_InternFromString("is_conj");
    state->str_is_neg = PyUnicode_InternFromString("is_neg");
    state->str_current_level = PyUnicode_InternFromString("_current_level");
    state->str_dtype = PyUnicode_InternFromString("dtype");
    state->str_F = PyUnicode_InternFromString("F");
    state->str_is_cpu = PyUnicode_InternFromString("is_cpu");
    state->str_is_meta = PyUnicode_InternFromString("is_meta");
    state->str_compiling_flag = PyUnicode_InternFromString("_is_compiling_flag");
    state->str_contiguous = PyUnicode_InternFromString("contiguous");
    if (!state->str_current_level || !state->str_dtype || !state->str_F || !state->str_is_cpu || !state->str_is_meta ||
        !state->str_compiling_flag || !state->str_contiguous || !state->str_dlpack || !state->str_exchange || !state->kw_max_version ||
        !state->max_version || !state->kwnames_max_version || !state->str_requires_grad || !state->str_is_conj ||
        !state->str_is_neg)
        goto done;
    dlpack_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    if (PyModule_AddStringConstant(module, "__version__", PYLAYOUT_VERSION_STRING) < 0 ||
        PyModule_AddObjectRef(module, "DLPACK_VERSION", dlpack_version) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(dlpack_version);
    Py_XDECREF(api);
    return rc;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    core_state *state = get_state(module);
    Py_VISIT(state->TensorType);
    Py_VISIT(state->increment_version);
    Py_VISIT(state->is_wrapped);
    Py_VISIT(state->torch_tensor);
    Py_VISIT(state->dispatch_depth);
    Py_VISIT(state->function_depth);
    Py_VISIT(state->py_on_device);
    Py_VISIT(state->is_functional);
    Py_VISIT(state->forward_ad);
    Py_VISIT(state->np_from_dlpack);
    Py_VISIT(state->ndarray_type);
    Py_VISIT(state->np_empty);
    Py_VISIT(state->np_api_capsule);
    Py_VISIT(state->torch_compiler);
    Py_VISIT(state->py_contiguous);
    Py_VISIT(state->py_contiguous_route);
    Py_VISIT(state->py_copy_into);
    Py_VISIT(state->py_copy_into_route);
    Py_VISIT(state->py_like);
    for (size_t i = 0; i < sizeof state->np_dtypes / sizeof state->np_dtypes[0]; i++)
        Py_VISIT(state->np_dtypes[i]);
    return 0;
}

static int module_clear(PyObject *module)
{
    core_state *state = get_state(module);
    Py_CLEAR(state->TensorType);
    Py_CLEAR(state->increment_version);
    Py_CLEAR(state->is_wrapped);
    Py_CLEAR(state->torch_tensor);
    Py_CLEAR(state->dispatch_depth);
    Py_CLEAR(state->function_depth);
    Py_CLEAR(state->py_on_device);
    Py_CLEAR(state->is_functional);
    Py_CLEAR(state->forward_ad);
    Py_CLEAR(state->np_from_dlpack);
    Py_CLEAR(state->ndarray_type);
    Py_CLEAR(state->np_empty);
    Py_CLEAR(state->np_api_capsule);
    Py_CLEAR(state->torch_compiler);
    Py_CLEAR(state->py_contiguous);
    Py_CLEAR(state->py_contiguous_route);
    Py_CLEAR(state->py_copy_into);
    Py_CLEAR(state->py_copy_into_route);
    Py_CLEAR(state->py_like);
    state->np_api = NULL;
    for (size_t i = 0; i < sizeof state->np_dtypes / sizeof state->np_dtypes[0]; i++)
        Py_CLEAR(state->np_dtypes[i]);
    Py_CLEAR(state->str_dtype);
    Py_CLEAR(state->str_F);
    Py_CLEAR(state->str_is_cpu);
    Py_CLEAR(state->str_is_meta);
    Py_CLEAR(state->str_compiling_flag);
    Py_CLEAR(state->str_contiguous);
    Py_CLEAR(state->str_current_level);
    Py_CLEAR(state->str_dlpack);
    Py_CLEAR(state->str_exchange);
    Py_CLEAR(state->kw_max_version);
    Py_CLEAR(state->max_version);
    Py_CLEAR(state->kwnames_max_version);
    Py_CLEAR(state->str_requires_grad);
    Py_CLEAR(state->str_is_conj);
    Py_CLEAR(state->str_is_neg);
    return 0;
}

static void module_free(void *module)
{
    module_clear(module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters /* 3.12+ */
    /* Safe with a GIL per interpreter: every Python object and the producer
     * cache live in module state (one per module copy, guarded by its own
     * interpreter's GIL); the process-wide things are immutable (the
     * exchange-API table, is_our_tensor's dealloc test) or the C core's,
     * which is thread-safe because copies already run with the GIL
     * released (locks, atomics and thread-locals, never Python).  The
     * exchange API finds the caller's interpreter's module (_core_exchange.c).
     * Whether numpy or torch can be used there is their own declaration. */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil /* 3.13+ */
    /* Not safe without the GIL: the producer cache's entries are several
     * words written and read without a lock (a torn entry could pair one
     * type with another's exchange API), type lookups keep borrowed
     * references (PyDict_GetItemWithError, tp_mro) and increment_version is
     * set lazily.  A free-threaded build re-enables the GIL on import. */
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

struct PyModuleDef _plext_module_def = {
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
    return PyModuleDef_Init(&_plext_module_def);
}
