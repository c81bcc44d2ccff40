/*
 * _core_exchange.c - pylayout's own DLPack C exchange API (the provider).
 *
 * pylayout.Tensor.__dlpack_c_exchange_api__ is a capsule holding the table
 * below, so consumers (torch, another pylayout) can import and make
 * pylayout tensors from C without calling __dlpack__.  The consumer side,
 * reading other producers' tables, is _core_import.c's.
 */
#include "_core.h"

/* This interpreter's pylayout._core, a new reference, for api_to_py: the
 * one callback that must make a Python object (a Tensor of this module's
 * type) yet is given none.  The exchange API's C signatures carry no
 * context, so PyType_GetModuleByDef has no type to start from, and a
 * pointer saved at module exec would be wrong in a second interpreter or a
 * second copy of the module.  The module this interpreter has imported, in
 * its sys.modules, is right; it is checked to be ours (PyModule_GetDef)
 * before its state is read, whatever was put under its name. */
static PyObject *imported_module(void)
{
    PyObject *name = PyUnicode_FromString("pylayout._core");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    if (!mod) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "pylayout._core is not imported");
        return NULL;
    }
    if (!PyModule_Check(mod) || PyModule_GetDef(mod) != &_plext_module_def) {
        PyErr_SetString(PyExc_RuntimeError, "sys.modules['pylayout._core'] is not pylayout's extension module");
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
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
        /* Not _plext_release(): the exchange API may call this without the GIL,
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
    if (!_plext_is_our_tensor(obj)) {
        PyErr_Format(PyExc_TypeError, "expected a pylayout.Tensor, got %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    pylayout_status st = pylayout_tensor_to_versioned(((TensorObject *)obj)->tensor, out);
    return st == PYLAYOUT_OK ? 0 : (_plext_raise_status(st), -1);
}

static int api_to_py(DLManagedTensorVersioned *m, void **out)
{
    PyObject *mod = imported_module();
    if (!mod) { /* ownership was handed to us: the deleter runs on every failure */
        PyObject *exc = PyErr_GetRaisedException_compat(); /* a deleter may run Python */
        if (m && m->deleter)
            m->deleter(m);
        PyErr_SetRaisedException_compat(exc);
        return -1;
    }
    *out = _plext_wrap_managed(get_state(mod), m); /* mod held: a failing deleter may run Python */
    Py_DECREF(mod);
    return *out ? 0 : -1;
}

static int api_dltensor_from_py(void *py_object, DLTensor *out)
{
    /* The API's contract says only objects of our own type come here, but a
     * class can copy the attribute: check, as api_from_py does. */
    if (!_plext_is_our_tensor(py_object)) {
        PyErr_Format(PyExc_TypeError, "expected a pylayout.Tensor, got %.200s",
                     Py_TYPE((PyObject *)py_object)->tp_name);
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

const DLPackExchangeAPI _plext_exchange_api = {
    .header = {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    .managed_tensor_allocator = api_allocator,
    .managed_tensor_from_py_object_no_sync = api_from_py,
    .managed_tensor_to_py_object_no_sync = api_to_py,
    .dltensor_from_py_object_no_sync = api_dltensor_from_py,
    .current_work_stream = api_current_stream,
};
