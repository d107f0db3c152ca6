// Python typemaps for the shared interface (swig/starling.i).
//
// - Tensors: a `const DLTensor*` / `DLTensor*` parameter takes a DLPack capsule
//   ("dltensor", or "dltensor_versioned" from DLPack 1.x producers) or any object with
//   the buffer protocol (read-only NumPy arrays, memoryview, bytes). Starling only
//   borrows: the capsule is neither renamed nor consumed, so its own destructor frees
//   it when Python drops it (the starling package keeps it alive until completion).
//   A CUDA tensor comes as (capsule, stream): see starling_py_stream_enter.
// - Streams are ints (cudaStream_t values); starling_gpu_path's text comes back as str.
// - Status codes: a negative starling_status_t raises the exception class registered
//   for that code (see starling/errors.py) with starling_last_error()'s text.
// - Handles come back as opaque SWIG objects; list-valued queries come back as Python
//   lists and dicts through the small helpers at the end of this file.
// - The module is built with -threads: the GIL is released around every C call except
//   the helpers marked %nothread, which only read local state and build Python objects.

%{
#include <string.h>

/* DLPack 1.x's versioned capsule. DLPack 0.6's header lacks it, but the layout is
 * fixed by the standard: {version, manager_ctx, deleter, flags, dl_tensor}. */
typedef struct {
  struct { uint32_t major, minor; } version;
  void* manager_ctx;
  void (*deleter)(void*);
  uint64_t flags;
  DLTensor dl_tensor;
} starling_py_versioned_tensor;
#define STARLING_PY_DLPACK_READ_ONLY 1u

/* Exception classes by -status, registered once by starling/errors.py. */
#define STARLING_PY_MAX_STATUS 32
static PyObject* starling_py_error_classes[STARLING_PY_MAX_STATUS];

static void starling_py_raise(starling_status_t status) {
  PyObject* cls = NULL;
  if (status < 0 && -status < STARLING_PY_MAX_STATUS) cls = starling_py_error_classes[-status];
  if (cls == NULL) cls = PyExc_RuntimeError;
  const char* message = starling_last_error();
  if (message == NULL || message[0] == '\0') message = starling_status_string(status);
  PyErr_SetString(cls, message);
}

/* A tensor argument: the DLTensor inside a capsule, or a view over a buffer. The
 * Py_buffer (if any) is released after the call; the memory stays valid as long as
 * the exporting object lives, which the caller guarantees. Whether a buffer is held
 * lives in a separate flag that the typemap initializes, because SWIG's error path
 * releases every argument, also those it never converted. */
typedef struct {
  DLTensor view;
  int64_t shape[64];
  int64_t strides[64];
  Py_buffer buffer;
} starling_py_tensor_arg;

static int starling_py_dtype_from_format(const char* format, Py_ssize_t itemsize, DLDataType* out) {
  const char* f = format ? format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  else if ((*f == '>' || *f == '!') && itemsize > 1) return 0;  /* big-endian data */
  if (f[0] == '\0' || f[1] != '\0') return 0;
  out->lanes = 1;
  out->bits = (uint8_t)(itemsize * 8);
  switch (f[0]) {
    case 'e': case 'f': case 'd': out->code = kDLFloat; return 1;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': out->code = kDLInt; return 1;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': out->code = kDLUInt; return 1;
    case '?': out->code = 6; return 1;  /* kDLBool in DLPack >= 0.8: rejected below as unsupported */
    default: return 0;
  }
}

/* CUDA tensors arrive as (capsule, stream): the stream (a cudaStream_t as an int, 0 for the
 * legacy default) is the caller's framework's current stream, which the capsule's producer
 * was asked to make the data ready on. It is this thread's Starling stream for the duration
 * of the call: set by the first tensor argument that carries one, restored by freearg.
 * Thread-local, because several Python threads may call at once. CPU tensors come as bare
 * capsules or buffers and never reach this code. */
static __thread int starling_py_stream_active = 0;
static __thread void* starling_py_stream_saved = NULL;

static int starling_py_stream_from(PyObject* obj, void** out, const char* what) {
  *out = NULL;
  if (obj == Py_None) return 1;
  if (!PyLong_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be a CUDA stream as an int (0 or None: the legacy default stream), got %s",
                 what, Py_TYPE(obj)->tp_name);
    return 0;
  }
  *out = PyLong_AsVoidPtr(obj);
  return !(*out == NULL && PyErr_Occurred());
}

static int starling_py_stream_enter(PyObject* obj, const char* what) {
  void* stream;
  if (!starling_py_stream_from(obj, &stream, what)) return 0;
  if (!starling_py_stream_active) {
    starling_get_cuda_stream(&starling_py_stream_saved);
    starling_py_stream_active = 1;
  }
  starling_set_cuda_stream(stream);
  return 1;
}

static void starling_py_stream_exit(void) {
  if (!starling_py_stream_active) return;
  starling_set_cuda_stream(starling_py_stream_saved);
  starling_py_stream_active = 0;
}

static DLTensor* starling_py_tensor(PyObject* obj, starling_py_tensor_arg* arg, int* has_buffer, int writable,
                                    const char* what) {
  if (PyTuple_CheckExact(obj) && PyTuple_GET_SIZE(obj) == 2 && PyCapsule_CheckExact(PyTuple_GET_ITEM(obj, 0))) {
    if (!starling_py_stream_enter(PyTuple_GET_ITEM(obj, 1), what)) return NULL;
    obj = PyTuple_GET_ITEM(obj, 0);
  }
  if (PyCapsule_CheckExact(obj)) {
    const char* name = PyCapsule_GetName(obj);
    if (name != NULL && strcmp(name, "dltensor") == 0) {
      DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(obj, name);
      return managed ? &managed->dl_tensor : NULL;
    }
    if (name != NULL && strcmp(name, "dltensor_versioned") == 0) {
      starling_py_versioned_tensor* managed = (starling_py_versioned_tensor*)PyCapsule_GetPointer(obj, name);
      if (managed == NULL) return NULL;
      if (managed->version.major != 1) {
        PyErr_Format(PyExc_TypeError, "%s: DLPack version %u.%u is not supported (Starling reads 1.x and legacy capsules)",
                     what, (unsigned)managed->version.major, (unsigned)managed->version.minor);
        return NULL;
      }
      if (writable && (managed->flags & STARLING_PY_DLPACK_READ_ONLY)) {
        PyErr_Format(PyExc_ValueError, "%s is read-only; pass a writable tensor as the output", what);
        return NULL;
      }
      return &managed->dl_tensor;
    }
    if (name != NULL && strncmp(name, "used_", 5) == 0) {
      PyErr_Format(PyExc_ValueError, "%s: this DLPack capsule was already consumed by another library; "
                   "pass the tensor itself or a fresh capsule", what);
      return NULL;
    }
    PyErr_Format(PyExc_TypeError, "%s: expected a DLPack capsule named 'dltensor', got a capsule named '%s'",
                 what, name ? name : "(null)");
    return NULL;
  }
  if (PyObject_CheckBuffer(obj)) {
    const int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &arg->buffer, flags) != 0) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, writable ? "%s (%s) is not a writable buffer; pass a writable tensor as the output"
                                              : "%s (%s) does not export a strided buffer",
                   what, Py_TYPE(obj)->tp_name);
      return NULL;
    }
    *has_buffer = 1;
    Py_buffer* b = &arg->buffer;
    if (b->ndim > 64) {
      PyErr_Format(PyExc_ValueError, "%s has %d dimensions (at most 64)", what, b->ndim);
      return NULL;
    }
    memset(&arg->view, 0, sizeof arg->view);
    if (!starling_py_dtype_from_format(b->format, b->itemsize, &arg->view.dtype)) {
      PyErr_Format(PyExc_ValueError, "%s has buffer format '%s', which Starling does not support; supported: "
                   "float16, float32, float64, int8, int16, int32, int64, uint8 in native byte order",
                   what, b->format ? b->format : "B");
      return NULL;
    }
    for (int i = 0; i < b->ndim; ++i) {
      arg->shape[i] = b->shape[i];
      /* Byte strides that are not whole elements cannot be contiguous: let the
       * contiguity check reject them with its message. */
      arg->strides[i] = b->strides[i] % b->itemsize == 0 ? b->strides[i] / b->itemsize : -1;
    }
    arg->view.data = b->buf;
    arg->view.device.device_type = kDLCPU;
    arg->view.device.device_id = 0;
    arg->view.ndim = b->ndim;
    arg->view.shape = arg->shape;
    arg->view.strides = arg->strides;
    arg->view.byte_offset = 0;
    return &arg->view;
  }
  PyErr_Format(PyExc_TypeError, "%s: expected a DLPack capsule or a buffer, got %s "
               "(the starling package accepts any object with __dlpack__)", what, Py_TYPE(obj)->tp_name);
  return NULL;
}

static void starling_py_tensor_release(starling_py_tensor_arg* arg, int* has_buffer) {
  if (*has_buffer) PyBuffer_Release(&arg->buffer);
  *has_buffer = 0;
  starling_py_stream_exit();
}

/* Arrays from Python: a sequence of ints / floats, or None (count 0, NULL). Empty
 * sequences give a non-NULL pointer so "none" and "default" stay distinguishable. */
static int starling_py_dummy_int;
static double starling_py_dummy_double;

static int starling_py_int_at(PyObject* item, int* out, const char* what) {
  if (PyFloat_Check(item) || PyBool_Check(item)) {
    PyErr_Format(PyExc_TypeError, "%s must contain integer ranks, got %s", what, Py_TYPE(item)->tp_name);
    return 0;
  }
  long v = PyLong_AsLong(item);  /* also accepts NumPy integers through __index__ */
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must contain integer ranks, got %s", what, Py_TYPE(item)->tp_name);
    return 0;
  }
  if (v < INT32_MIN || v > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s contains %ld, out of range", what, v);
    return 0;
  }
  *out = (int)v;
  return 1;
}

static int starling_py_double_at(PyObject* item, double* out, const char* what) {
  double v = PyFloat_AsDouble(item);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must contain numbers, got %s", what, Py_TYPE(item)->tp_name);
    return 0;
  }
  *out = v;
  return 1;
}

static int starling_py_int_array(PyObject* obj, int** out, int* count, const char* what) {
  *out = NULL;
  *count = 0;
  if (obj == Py_None) return 1;
  PyObject* seq = PySequence_Fast(obj, "");
  if (seq == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a sequence of ranks, got %s", what, Py_TYPE(obj)->tp_name);
    return 0;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  *out = n ? (int*)PyMem_Malloc(sizeof(int) * (size_t)n) : &starling_py_dummy_int;
  if (*out == NULL) { Py_DECREF(seq); PyErr_NoMemory(); return 0; }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!starling_py_int_at(PySequence_Fast_GET_ITEM(seq, i), &(*out)[i], what)) {
      Py_DECREF(seq);
      if (n) PyMem_Free(*out);
      *out = NULL;
      return 0;
    }
  }
  Py_DECREF(seq);
  *count = (int)n;
  return 1;
}

static int starling_py_double_array(PyObject* obj, double** out, int* count, const char* what) {
  *out = NULL;
  *count = 0;
  PyObject* seq = PySequence_Fast(obj, "");
  if (seq == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a sequence of numbers, got %s", what, Py_TYPE(obj)->tp_name);
    return 0;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  *out = n ? (double*)PyMem_Malloc(sizeof(double) * (size_t)n) : &starling_py_dummy_double;
  if (*out == NULL) { Py_DECREF(seq); PyErr_NoMemory(); return 0; }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!starling_py_double_at(PySequence_Fast_GET_ITEM(seq, i), &(*out)[i], what)) {
      Py_DECREF(seq);
      if (n) PyMem_Free(*out);
      *out = NULL;
      return 0;
    }
  }
  Py_DECREF(seq);
  *count = (int)n;
  return 1;
}

static void starling_py_free_ints(int* p) {
  if (p != NULL && p != &starling_py_dummy_int) PyMem_Free(p);
}
static void starling_py_free_doubles(double* p) {
  if (p != NULL && p != &starling_py_dummy_double) PyMem_Free(p);
}

/* Ranks with weights: None; a dict {rank: weight} (insertion order kept); or a
 * sequence of ranks (weights NULL, meaning 1.0 each). */
static int starling_py_rank_weights(PyObject* obj, int* count, int** ranks, double** weights, const char* what) {
  *weights = NULL;
  if (!PyDict_Check(obj)) return starling_py_int_array(obj, ranks, count, what);
  const Py_ssize_t n = PyDict_Size(obj);
  *count = 0;
  *ranks = n ? (int*)PyMem_Malloc(sizeof(int) * (size_t)n) : &starling_py_dummy_int;
  *weights = n ? (double*)PyMem_Malloc(sizeof(double) * (size_t)n) : &starling_py_dummy_double;
  if (*ranks == NULL || *weights == NULL) {
    if (n) { PyMem_Free(*ranks); PyMem_Free(*weights); }
    *ranks = NULL; *weights = NULL;
    PyErr_NoMemory();
    return 0;
  }
  Py_ssize_t pos = 0, i = 0;
  PyObject *key, *value;
  while (PyDict_Next(obj, &pos, &key, &value)) {
    if (!starling_py_int_at(key, &(*ranks)[i], what) || !starling_py_double_at(value, &(*weights)[i], what)) {
      if (n) { PyMem_Free(*ranks); PyMem_Free(*weights); }
      *ranks = NULL; *weights = NULL;
      return 0;
    }
    ++i;
  }
  *count = (int)n;
  return 1;
}

/* A list of ints (for the query helpers). */
static PyObject* starling_py_int_list(const int* values, int count) {
  PyObject* list = PyList_New(count);
  if (list == NULL) return NULL;
  for (int i = 0; i < count; ++i) PyList_SET_ITEM(list, i, PyLong_FromLong(values[i]));
  return list;
}
%}

// ---- status codes -> exceptions ---------------------------------------------------
%typemap(out) starling_status_t {
  if ($1 < 0) {
    starling_py_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}
// request_test: True when finished successfully, False while in progress.
%typemap(out) starling_status_t starling_request_test {
  if ($1 < 0) {
    starling_py_raise($1);
    SWIG_fail;
  }
  $result = PyBool_FromLong($1 == STARLING_SUCCESS);
}

// ---- tensors --------------------------------------------------------------------------
%typemap(in) const DLTensor* (starling_py_tensor_arg tensor_arg, int tensor_buffered = 0) {
  $1 = starling_py_tensor($input, &tensor_arg, &tensor_buffered, 0, "$1_name");
  if ($1 == NULL) SWIG_fail;
}
%typemap(freearg) const DLTensor* { starling_py_tensor_release(&tensor_arg$argnum, &tensor_buffered$argnum); }
%typemap(in) DLTensor* (starling_py_tensor_arg tensor_arg, int tensor_buffered = 0) {
  $1 = starling_py_tensor($input, &tensor_arg, &tensor_buffered, 1, "$1_name");
  if ($1 == NULL) SWIG_fail;
}
%typemap(freearg) DLTensor* { starling_py_tensor_release(&tensor_arg$argnum, &tensor_buffered$argnum); }

%typemap(in) DLDataType {
  unsigned code, bits, lanes;
  if (!PyTuple_Check($input)) {
    PyErr_SetString(PyExc_TypeError, "a DLPack dtype is a tuple (code, bits, lanes)");
    SWIG_fail;
  }
  if (!PyArg_ParseTuple($input, "III", &code, &bits, &lanes)) SWIG_fail;
  $1.code = (uint8_t)code;
  $1.bits = (uint8_t)bits;
  $1.lanes = (uint16_t)lanes;
}

// first_dims: None or a writable int64 buffer (the package passes a NumPy array of
// the right length).
%typemap(in) int64_t* first_dims (Py_buffer dims_view, int has_dims_view = 0) {
  $1 = NULL;
  if ($input != Py_None) {
    if (PyObject_GetBuffer($input, &dims_view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
    has_dims_view = 1;
    if (dims_view.itemsize != 8 || dims_view.format == NULL || (strcmp(dims_view.format, "q") != 0 && strcmp(dims_view.format, "l") != 0)) {
      PyErr_SetString(PyExc_TypeError, "first_dims must be a writable int64 buffer");
      SWIG_fail;
    }
    $1 = (int64_t*)dims_view.buf;
  }
}
%typemap(freearg) int64_t* first_dims { if (has_dims_view$argnum) PyBuffer_Release(&dims_view$argnum); }

// counts (reduce_scatter, alltoall through py_reduce_scatter / py_alltoall below): None
// or a C-contiguous int64 buffer of size() entries (the package passes a NumPy array it
// checked); the C call copies it. void*: SWIG's cast would call int64_t long long.
%typemap(in) const void* counts (Py_buffer counts_view, int has_counts_view = 0) {
  $1 = NULL;
  if ($input != Py_None) {
    if (PyObject_GetBuffer($input, &counts_view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
    has_counts_view = 1;
    if (counts_view.itemsize != 8 || counts_view.format == NULL || (strcmp(counts_view.format, "q") != 0 && strcmp(counts_view.format, "l") != 0)) {
      PyErr_SetString(PyExc_TypeError, "$1_name must be an int64 buffer");
      SWIG_fail;
    }
    $1 = counts_view.buf;
  }
}
%typemap(freearg) const void* counts { if (has_counts_view$argnum) PyBuffer_Release(&counts_view$argnum); }
%apply const void* counts { const void* send_counts, const void* recv_counts };

// ---- handles produced by a call ----------------------------------------------------------
// Outputs replace the None that a status becomes (typemap above); a second output makes
// a list. The project's own helper, not SWIG_Python_AppendOutput (nor typemaps.i's
// OUTPUT, which calls it): SWIG 4.3 changed that to keep the None of a function that is
// not void, so a status function returned [None, output] when built with SWIG >= 4.3
// (`pip install swig`) and its output with SWIG 4.1 (Debian's).
%{
static PyObject* starling_py_append_output(PyObject* result, PyObject* obj) {
  if (obj == NULL) {  // the output's conversion failed (its exception is set)
    Py_XDECREF(result);
    return NULL;
  }
  if (result == NULL || result == Py_None) {
    Py_XDECREF(result);
    return obj;
  }
  if (!PyList_Check(result)) {
    PyObject* list = PyList_New(1);
    if (list == NULL) {
      Py_DECREF(result);
      Py_DECREF(obj);
      return NULL;
    }
    PyList_SET_ITEM(list, 0, result);
    result = list;
  }
  int appended = PyList_Append(result, obj);
  Py_DECREF(obj);
  if (appended != 0) {
    Py_DECREF(result);
    return NULL;
  }
  return result;
}
%}
%define STARLING_PY_HANDLE_OUT(TYPE, NAME)
%typemap(in, numinputs=0) TYPE* NAME (TYPE temp = NULL) { $1 = &temp; }
%typemap(argout) TYPE* NAME {
  $result = starling_py_append_output($result, SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0));
}
%enddef
STARLING_PY_HANDLE_OUT(starling_context_t, out)
STARLING_PY_HANDLE_OUT(starling_request_t, req)
STARLING_PY_HANDLE_OUT(starling_topology_t, out)
STARLING_PY_HANDLE_OUT(starling_schedule_t, out)
STARLING_PY_HANDLE_OUT(starling_window_t, out)

// ---- CUDA streams and the GPU path ----------------------------------------------------
// A stream crosses as an int (a cudaStream_t; 0 or None is the legacy default stream).
%typemap(in) void* stream {
  if (!starling_py_stream_from($input, &$1, "stream")) SWIG_fail;
}
// A fresh output's data pointer (tensor.data_ptr()), for the *_into helpers below.
%typemap(in) void* out_data {
  $1 = PyLong_AsVoidPtr($input);
  if ($1 == NULL && PyErr_Occurred()) SWIG_fail;
}
%typemap(in, numinputs=0) void** out (void* stream_out = NULL) { $1 = &stream_out; }
%typemap(argout) void** out { $result = starling_py_append_output($result, PyLong_FromVoidPtr(*$1)); }
%typemap(in, numinputs=0) const char** out (const char* text_out = NULL) { $1 = ($1_ltype)&text_out; }
%typemap(argout) const char** out {
  $result = starling_py_append_output($result, PyUnicode_FromString(*$1 ? *$1 : ""));
}

// Scalar outputs (counts, ranks, flags, seconds).
%typemap(in, numinputs=0) int* out (int int_out = 0), int* is_weighted (int int_out = 0) { $1 = &int_out; }
%typemap(argout) int* out, int* is_weighted { $result = starling_py_append_output($result, PyLong_FromLong(*$1)); }
%typemap(in, numinputs=0) double* out (double double_out = 0) { $1 = &double_out; }
%typemap(argout) double* out { $result = starling_py_append_output($result, PyFloat_FromDouble(*$1)); }

// ---- rank lists -----------------------------------------------------------------------
%typemap(in) (const int* ranks, int count) (int* rank_list = NULL, int rank_count = 0) {
  if (!starling_py_int_array($input, &rank_list, &rank_count, "ranks")) SWIG_fail;
  $1 = rank_list;
  $2 = rank_count;
}
%typemap(freearg) (const int* ranks, int count) { starling_py_free_ints(rank_list$argnum); }

%typemap(in) (int num_ranks, const int* ranks, const double* weights) (int* weighted_ranks = NULL, double* rank_weights = NULL, int weighted_count = 0) {
  if (!starling_py_rank_weights($input, &weighted_count, &weighted_ranks, &rank_weights, "$1_name")) SWIG_fail;
  $1 = weighted_count;
  $2 = weighted_ranks;
  $3 = rank_weights;
}
%typemap(freearg) (int num_ranks, const int* ranks, const double* weights) {
  starling_py_free_ints(weighted_ranks$argnum);
  starling_py_free_doubles(rank_weights$argnum);
}
%apply (int num_ranks, const int* ranks, const double* weights) {
  (int num_sources, const int* source_ranks, const double* source_weights),
  (int num_destinations, const int* destination_ranks, const double* destination_weights)
};

// ---- names: strip the prefix (starling._core.allreduce), and leave out what the
// helpers below replace (out-parameter arrays, option structs with pointers).
%rename("%(strip:[starling_])s") "";
%ignore starling_context_options;
%ignore starling_stats;
%ignore starling_peer_stats;
%ignore starling_neighbor_args;
%ignore starling_compression;
%ignore starling_allreduce_compressed;
%ignore starling_allreduce_compressed_nonblocking;
%ignore starling_neighbor_allreduce_compressed;
%ignore starling_neighbor_allreduce_compressed_nonblocking;
%ignore starling_window_args;
%ignore starling_window_update_args;
%ignore starling_context_create;
%ignore starling_split_options;
%ignore starling_context_split;
%ignore starling_reduce_scatter;
%ignore starling_reduce_scatter_nonblocking;
%ignore starling_alltoall;
%ignore starling_alltoall_nonblocking;
%ignore starling_get_stats;
%ignore starling_get_peer_stats;
%ignore starling_probe_peers;
%ignore starling_probe_args;
%ignore starling_repair_options;
%ignore starling_repair_result;
%ignore starling_context_repair;
%ignore starling_grow_options;
%ignore starling_grow_result;
%ignore starling_context_grow;
%ignore starling_shrink_options;
%ignore starling_shrink_result;
%ignore starling_context_shrink;
%ignore starling_context_resize;  // Context.resize composes shrink and grow itself
%ignore starling_neighbor_allreduce;
%ignore starling_neighbor_allreduce_nonblocking;
%ignore starling_neighbor_allgather;
%ignore starling_neighbor_allgather_nonblocking;
%ignore starling_neighbor_allgather_first_dims;
%ignore starling_hierarchical_neighbor_allreduce;
%ignore starling_hierarchical_neighbor_allreduce_nonblocking;
%ignore starling_topology_create;
%ignore starling_topology_edges;
%ignore starling_topology_in_neighbors;
%ignore starling_topology_out_neighbors;
%ignore starling_topology_recv_weights;
%ignore starling_topology_send_weights;
%ignore starling_schedule_next;
%ignore starling_schedule_fast_pairs;
%ignore starling_in_neighbors;
%ignore starling_out_neighbors;
%ignore starling_window_names;
%ignore starling_window_put;
%ignore starling_window_put_nonblocking;
%ignore starling_window_accumulate;
%ignore starling_window_accumulate_nonblocking;
%ignore starling_window_get;
%ignore starling_window_get_nonblocking;
%ignore starling_window_update;
%ignore starling_window_versions;

// Local queries that build Python objects: they hold the GIL (%nothread).
%nothread py_register_error;
%nothread py_topology_create;
%nothread py_topology_edges;
%nothread py_topology_neighbors;
%nothread py_topology_weights;
%nothread py_context_neighbors;
%nothread py_schedule_next;
%nothread py_schedule_fast_pairs;
%nothread py_window_names;
%nothread py_window_versions;
%nothread py_get_stats;
%nothread py_get_peer_stats;
%nothread py_context_repair;
%nothread py_context_grow;
%nothread py_context_shrink;

// ---- helpers: flat Python arguments in place of option structs -----------------------
%inline %{
/* Registers the exception class raised for `status` (< 0). */
static PyObject* py_register_error(int status, PyObject* cls) {
  if (status >= 0 || -status >= STARLING_PY_MAX_STATUS || !PyExceptionClass_Check(cls)) {
    PyErr_SetString(PyExc_ValueError, "py_register_error(status < 0, exception class)");
    return NULL;
  }
  Py_INCREF(cls);
  Py_XDECREF(starling_py_error_classes[-status]);
  starling_py_error_classes[-status] = cls;
  Py_RETURN_NONE;
}

static starling_status_t py_context_create(int use_host_comm, int64_t host_comm, int nodes_per_machine,
                                           starling_context_t* out) {
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  options.use_host_comm = use_host_comm;
  options.host_comm = host_comm;
  options.nodes_per_machine = nodes_per_machine;
  return starling_context_create(&options, out);
}

/* starling_probe_peers with flat arguments; the figures are read back from the peer
 * stats (the GIL is released meanwhile). */
static starling_status_t py_probe_peers(starling_context_t ctx, int repetitions, uint64_t bulk_bytes) {
  starling_probe_args_t args = STARLING_PROBE_ARGS_INIT;
  args.repetitions = repetitions;
  args.bulk_bytes = bulk_bytes;
  return starling_probe_peers(ctx, &args, NULL, NULL, 0);
}

/* reduce_scatter / alltoall, blocking (*req stays NULL: None) or not. */
static starling_status_t py_reduce_scatter(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                           const void* counts, starling_reduce_op_t op, const char* name,
                                           int nonblocking, starling_request_t* req) {
  return nonblocking ? starling_reduce_scatter_nonblocking(ctx, in, out, (const int64_t*)counts, op, name, req)
                     : starling_reduce_scatter(ctx, in, out, (const int64_t*)counts, op, name);
}
static starling_status_t py_alltoall(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                     const void* send_counts, const void* recv_counts, const char* name,
                                     int nonblocking, starling_request_t* req) {
  return nonblocking ? starling_alltoall_nonblocking(ctx, in, out, (const int64_t*)send_counts,
                                                     (const int64_t*)recv_counts, name, req)
                     : starling_alltoall(ctx, in, out, (const int64_t*)send_counts, (const int64_t*)recv_counts,
                                         name);
}

/* *out = NULL for STARLING_SPLIT_UNDEFINED (None in Python). */
static starling_status_t py_context_split(starling_context_t ctx, int color, int key, int nodes_per_machine,
                                          starling_context_t* out) {
  starling_split_options_t options = STARLING_SPLIT_OPTIONS_INIT;
  options.nodes_per_machine = nodes_per_machine;
  return starling_context_split(ctx, color, key, &options, out);
}

/* kind: 0 neighbor_allreduce, 1 hierarchical_neighbor_allreduce. */
static starling_status_t py_neighbor_allreduce(int kind, starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                               int use_weights, double self_weight,
                                               int num_sources, const int* source_ranks, const double* source_weights,
                                               int dynamic,
                                               int num_destinations, const int* destination_ranks,
                                               const double* destination_weights,
                                               int check_topology, const char* name, int nonblocking,
                                               starling_request_t* req) {
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.use_weights = use_weights;
  args.self_weight = self_weight;
  args.num_sources = num_sources;
  args.source_ranks = source_ranks;
  args.source_weights = source_weights;
  args.dynamic = dynamic;
  args.num_destinations = num_destinations;
  args.destination_ranks = destination_ranks;
  args.destination_weights = destination_weights;
  args.check_topology = check_topology;
  args.name = name;
  if (kind == 1) {
    return nonblocking ? starling_hierarchical_neighbor_allreduce_nonblocking(ctx, in, out, &args, req)
                       : starling_hierarchical_neighbor_allreduce(ctx, in, out, &args);
  }
  return nonblocking ? starling_neighbor_allreduce_nonblocking(ctx, in, out, &args, req)
                     : starling_neighbor_allreduce(ctx, in, out, &args);
}

/* Blocking out-of-place calls into a fresh contiguous output of the input's shape, dtype
 * and device (starling.torch allocates it): the output crosses as its data pointer and
 * its descriptor is the input's with that pointer, which saves exporting and freeing a
 * second DLPack capsule per call (~0.5 us). Blocking only: the descriptor lives on this
 * stack frame, while a nonblocking operation may read it after the call returns. */
static DLTensor starling_py_output_like(const DLTensor* in, void* out_data) {
  DLTensor out = *in;
  out.data = out_data;
  out.byte_offset = 0;
  out.strides = NULL;  /* compact row-major, as allocated */
  return out;
}

static starling_status_t py_allreduce_into(int local, starling_context_t ctx, const DLTensor* in, void* out_data,
                                           starling_reduce_op_t op, const char* name) {
  DLTensor out = starling_py_output_like(in, out_data);
  return local ? starling_local_allreduce(ctx, in, &out, op, name) : starling_allreduce(ctx, in, &out, op, name);
}

static starling_status_t py_neighbor_allreduce_into(int kind, starling_context_t ctx, const DLTensor* in,
                                                    void* out_data, int use_weights, double self_weight,
                                                    int num_sources, const int* source_ranks,
                                                    const double* source_weights, int dynamic,
                                                    int num_destinations, const int* destination_ranks,
                                                    const double* destination_weights,
                                                    int check_topology, const char* name) {
  DLTensor out = starling_py_output_like(in, out_data);
  return py_neighbor_allreduce(kind, ctx, in, &out, use_weights, self_weight, num_sources, source_ranks,
                               source_weights, dynamic, num_destinations, destination_ranks, destination_weights,
                               check_topology, name, 0, NULL);
}

/* The common call, neighbor_allreduce(tensor) over the static topology: no weights,
 * no ranks to convert (0.9 -> ~0.6 us of the call at 1 rank, as allreduce's). */
static starling_status_t py_neighbor_allreduce_static_into(starling_context_t ctx, const DLTensor* in,
                                                           void* out_data, const char* name) {
  DLTensor out = starling_py_output_like(in, out_data);
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.name = name;
  return starling_neighbor_allreduce(ctx, in, &out, &args);
}

/* Compressed allreduce (kind 0) and CHOCO neighbor_allreduce (kind 1): the option
 * struct as flat arguments; the neighbor arguments as py_neighbor_allreduce's. */
static starling_status_t py_compressed(int kind, starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                       starling_reduce_op_t op, int compressor, int64_t k, double ratio,
                                       uint64_t seed, int error_feedback, double gamma,
                                       int use_weights, double self_weight,
                                       int num_sources, const int* source_ranks, const double* source_weights,
                                       int dynamic,
                                       int num_destinations, const int* destination_ranks,
                                       const double* destination_weights,
                                       int check_topology, const char* name, int nonblocking,
                                       starling_request_t* req) {
  starling_compression_t c = STARLING_COMPRESSION_INIT;
  c.compressor = compressor;
  c.k = k;
  c.ratio = ratio;
  c.seed = seed;
  c.error_feedback = error_feedback;
  c.gamma = gamma;
  if (kind == 0) {
    return nonblocking ? starling_allreduce_compressed_nonblocking(ctx, in, out, op, name, &c, req)
                       : starling_allreduce_compressed(ctx, in, out, op, name, &c);
  }
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.use_weights = use_weights;
  args.self_weight = self_weight;
  args.num_sources = num_sources;
  args.source_ranks = source_ranks;
  args.source_weights = source_weights;
  args.dynamic = dynamic;
  args.num_destinations = num_destinations;
  args.destination_ranks = destination_ranks;
  args.destination_weights = destination_weights;
  args.check_topology = check_topology;
  args.name = name;
  return nonblocking ? starling_neighbor_allreduce_compressed_nonblocking(ctx, in, out, &args, &c, req)
                     : starling_neighbor_allreduce_compressed(ctx, in, out, &args, &c);
}

static starling_status_t py_neighbor_allgather(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                               int64_t* first_dims,
                                               int num_sources, const int* source_ranks, const double* source_weights,
                                               int dynamic,
                                               int num_destinations, const int* destination_ranks,
                                               const double* destination_weights,
                                               int check_topology, const char* name, int nonblocking,
                                               starling_request_t* req) {
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;  /* weights are ignored by allgather */
  args.num_sources = num_sources;
  args.source_ranks = source_ranks;
  args.dynamic = dynamic;
  args.num_destinations = num_destinations;
  args.destination_ranks = destination_ranks;
  args.check_topology = check_topology;
  args.name = name;
  (void)source_weights;
  (void)destination_weights;
  return nonblocking ? starling_neighbor_allgather_nonblocking(ctx, in, out, first_dims, &args, req)
                     : starling_neighbor_allgather(ctx, in, out, first_dims, &args);
}

static starling_status_t py_neighbor_allgather_first_dims(starling_context_t ctx, const DLTensor* in,
                                                          int64_t* first_dims,
                                                          int num_sources, const int* source_ranks,
                                                          const double* source_weights, int dynamic,
                                                          int num_destinations, const int* destination_ranks,
                                                          const double* destination_weights, int check_topology,
                                                          const char* name) {
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.num_sources = num_sources;
  args.source_ranks = source_ranks;
  args.dynamic = dynamic;
  args.num_destinations = num_destinations;
  args.destination_ranks = destination_ranks;
  args.check_topology = check_topology;
  args.name = name;
  (void)source_weights;
  (void)destination_weights;
  return starling_neighbor_allgather_first_dims(ctx, in, first_dims, &args);
}
%}

%inline %{
/* kind: 0 put, 1 accumulate. ranks None: every out-neighbor. */
static starling_status_t py_window_put(int kind, starling_window_t win, DLTensor* tensor,
                                       int num_ranks, const int* ranks, const double* weights,
                                       double self_weight, int require_mutex, int nonblocking,
                                       starling_request_t* req) {
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = num_ranks;
  args.ranks = ranks;
  args.weights = weights;
  args.self_weight = self_weight;
  args.require_mutex = require_mutex;
  if (kind == 1) {
    return nonblocking ? starling_window_accumulate_nonblocking(win, tensor, &args, req)
                       : starling_window_accumulate(win, tensor, &args);
  }
  return nonblocking ? starling_window_put_nonblocking(win, tensor, &args, req) : starling_window_put(win, tensor, &args);
}

/* ranks None: every in-neighbor. */
static starling_status_t py_window_get(starling_window_t win, int num_ranks, const int* ranks, const double* weights,
                                       int require_mutex, int nonblocking, starling_request_t* req) {
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = num_ranks;
  args.ranks = ranks;
  args.weights = weights;
  args.require_mutex = require_mutex;
  return nonblocking ? starling_window_get_nonblocking(win, &args, req) : starling_window_get(win, &args);
}

static starling_status_t py_window_update(starling_window_t win, int use_weights, double self_weight,
                                          int num_ranks, const int* ranks, const double* weights,
                                          int reset, int require_mutex) {
  starling_window_update_args_t args = STARLING_WINDOW_UPDATE_ARGS_INIT;
  args.use_weights = use_weights;
  args.self_weight = self_weight;
  args.num_ranks = num_ranks;
  args.ranks = ranks;
  args.weights = weights;
  args.reset = reset;
  args.require_mutex = require_mutex;
  return starling_window_update(win, &args);
}
%}


%{
/* A list query called twice: once for the count, once for the entries. */
typedef starling_status_t (*starling_py_list_fn)(void* handle, int rank, int* ranks, int capacity, int* count);

static starling_status_t starling_py_topology_in(void* h, int rank, int* r, int c, int* n) {
  return starling_topology_in_neighbors((starling_topology_t)h, rank, r, c, n);
}
static starling_status_t starling_py_topology_out(void* h, int rank, int* r, int c, int* n) {
  return starling_topology_out_neighbors((starling_topology_t)h, rank, r, c, n);
}
static starling_status_t starling_py_context_in(void* h, int rank, int* r, int c, int* n) {
  (void)rank;
  return starling_in_neighbors((starling_context_t)h, r, c, n);
}
static starling_status_t starling_py_context_out(void* h, int rank, int* r, int c, int* n) {
  (void)rank;
  return starling_out_neighbors((starling_context_t)h, r, c, n);
}

static PyObject* starling_py_list(starling_py_list_fn fn, void* handle, int rank) {
  int count = 0;
  starling_status_t status = fn(handle, rank, NULL, 0, &count);
  if (status < 0 && count == 0) { starling_py_raise(status); return NULL; }
  int* ranks = (int*)PyMem_Malloc(sizeof(int) * (size_t)(count + 1));
  if (ranks == NULL) return PyErr_NoMemory();
  status = fn(handle, rank, ranks, count, &count);
  PyObject* list = status < 0 ? NULL : starling_py_int_list(ranks, count);
  if (status < 0) starling_py_raise(status);
  PyMem_Free(ranks);
  return list;
}

%}

// Rank lists of grow and shrink (not wrapped: a plain %{ %} block).
%{
/* Reads `count` ints (at most `capacity`) from the sequence `seq` into out; 0, or -1 with
 * ValueError naming `what`. */
static int starling_py_read_ints(PyObject* seq, int count, int* out, int capacity, const char* what) {
  const Py_ssize_t n = PySequence_Check(seq) ? PySequence_Size(seq) : -1;
  if (n < 0 || n > capacity || n != count) {
    PyErr_Format(PyExc_ValueError, "%s must be a sequence of count (at most %d) ints", what, capacity);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_GetItem(seq, i);
    out[i] = item ? (int)PyLong_AsLong(item) : -1;
    Py_XDECREF(item);
    if (PyErr_Occurred()) return -1;
  }
  return 0;
}
%}

%inline %{
static PyObject* py_topology_create(int size, PyObject* sources, PyObject* destinations, PyObject* weights) {
  int *src = NULL, *dst = NULL, ns = 0, nd = 0;
  double* w = NULL;
  PyObject* result = NULL;
  if (!starling_py_int_array(sources, &src, &ns, "sources") || !starling_py_int_array(destinations, &dst, &nd, "destinations")) goto done;
  if (weights != Py_None) {
    int nw = 0;
    if (!starling_py_double_array(weights, &w, &nw, "weights")) goto done;
    if (nw != ns) {
      PyErr_Format(PyExc_ValueError, "%d weights for %d edges", nw, ns);
      goto done;
    }
  }
  if (ns != nd) {
    PyErr_Format(PyExc_ValueError, "%d sources but %d destinations", ns, nd);
    goto done;
  }
  {
    starling_topology_t topo = NULL;
    const starling_status_t status = starling_topology_create(size, ns, src, dst, w, &topo);
    if (status < 0) {
      starling_py_raise(status);
      goto done;
    }
    result = SWIG_NewPointerObj(SWIG_as_voidptr(topo), SWIGTYPE_p_starling_topology_s, 0);
  }
done:
  starling_py_free_ints(src);
  starling_py_free_ints(dst);
  starling_py_free_doubles(w);
  return result;
}

/* starling_schedule_fast_pairs with link_seconds as a flat sequence of floats. */
static PyObject* py_schedule_fast_pairs(int world_size, int rank, PyObject* link_seconds, double threshold_seconds) {
  double* links = NULL;
  int n = 0;
  if (!starling_py_double_array(link_seconds, &links, &n, "link_seconds")) return NULL;
  starling_schedule_t sched = NULL;
  const starling_status_t status = starling_schedule_fast_pairs(world_size, rank, links, n, threshold_seconds, &sched);
  starling_py_free_doubles(links);
  if (status < 0) {
    starling_py_raise(status);
    return NULL;
  }
  return SWIG_NewPointerObj(SWIG_as_voidptr(sched), SWIGTYPE_p_starling_schedule_s, 0);
}

/* [(source, destination, weight), ...] sorted by (source, destination). */
static PyObject* py_topology_edges(starling_topology_t topo) {
  int n = 0;
  starling_status_t status = starling_topology_num_edges(topo, &n);
  if (status < 0) { starling_py_raise(status); return NULL; }
  int* src = (int*)PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
  int* dst = (int*)PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
  double* w = (double*)PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
  PyObject* list = NULL;
  if (!src || !dst || !w) { PyErr_NoMemory(); goto done; }
  status = starling_topology_edges(topo, src, dst, w, n);
  if (status < 0) { starling_py_raise(status); goto done; }
  list = PyList_New(n);
  for (int i = 0; list != NULL && i < n; ++i) PyList_SET_ITEM(list, i, Py_BuildValue("(iid)", src[i], dst[i], w[i]));
done:
  PyMem_Free(src);
  PyMem_Free(dst);
  PyMem_Free(w);
  return list;
}

static PyObject* py_topology_neighbors(starling_topology_t topo, int rank, int incoming) {
  return starling_py_list(incoming ? starling_py_topology_in : starling_py_topology_out, (void*)topo, rank);
}

static PyObject* py_context_neighbors(starling_context_t ctx, int incoming) {
  return starling_py_list(incoming ? starling_py_context_in : starling_py_context_out, (void*)ctx, 0);
}

/* (self_weight, {rank: weight}) with ranks ascending. */
static PyObject* py_topology_weights(starling_topology_t topo, int rank, int receiving) {
  int count = 0;
  double self_weight = 0;
  starling_status_t status = receiving ? starling_topology_recv_weights(topo, rank, &self_weight, NULL, NULL, 0, &count)
                                       : starling_topology_send_weights(topo, rank, &self_weight, NULL, NULL, 0, &count);
  if (status < 0 && count == 0) { starling_py_raise(status); return NULL; }
  int* ranks = (int*)PyMem_Malloc(sizeof(int) * (size_t)(count + 1));
  double* weights = (double*)PyMem_Malloc(sizeof(double) * (size_t)(count + 1));
  PyObject* result = NULL;
  if (!ranks || !weights) { PyErr_NoMemory(); goto done; }
  status = receiving ? starling_topology_recv_weights(topo, rank, &self_weight, ranks, weights, count, &count)
                     : starling_topology_send_weights(topo, rank, &self_weight, ranks, weights, count, &count);
  if (status < 0) { starling_py_raise(status); goto done; }
  {
    PyObject* dict = PyDict_New();
    for (int i = 0; dict != NULL && i < count; ++i) {
      PyObject* k = PyLong_FromLong(ranks[i]);
      PyObject* v = PyFloat_FromDouble(weights[i]);
      PyDict_SetItem(dict, k, v);
      Py_XDECREF(k);
      Py_XDECREF(v);
    }
    if (dict != NULL) result = Py_BuildValue("(dN)", self_weight, dict);
  }
done:
  PyMem_Free(ranks);
  PyMem_Free(weights);
  return result;
}

/* ([send ranks], [recv ranks]) for the next step. */
static PyObject* py_schedule_next(starling_schedule_t sched) {
  int ns = 0, nr = 0;
  starling_status_t status = starling_schedule_next(sched, NULL, 0, &ns, NULL, 0, &nr);
  if (status >= 0 && ns == 0 && nr == 0) return Py_BuildValue("([][])");
  int* s = (int*)PyMem_Malloc(sizeof(int) * (size_t)(ns + 1));
  int* r = (int*)PyMem_Malloc(sizeof(int) * (size_t)(nr + 1));
  PyObject* result = NULL;
  if (!s || !r) { PyErr_NoMemory(); goto done; }
  status = starling_schedule_next(sched, s, ns, &ns, r, nr, &nr);
  if (status < 0) { starling_py_raise(status); goto done; }
  result = Py_BuildValue("(NN)", starling_py_int_list(s, ns), starling_py_int_list(r, nr));
done:
  PyMem_Free(s);
  PyMem_Free(r);
  return result;
}

static PyObject* py_window_names(starling_context_t ctx) {
  size_t length = 0;
  starling_status_t status = starling_window_names(ctx, NULL, 0, &length);
  if (status < 0 && length == 0) { starling_py_raise(status); return NULL; }
  char* text = (char*)PyMem_Malloc(length + 1);
  if (text == NULL) return PyErr_NoMemory();
  status = starling_window_names(ctx, text, length + 1, &length);
  PyObject* result = NULL;
  if (status < 0) {
    starling_py_raise(status);
  } else {
    PyObject* all = PyUnicode_FromStringAndSize(text, (Py_ssize_t)length);
    if (all != NULL && length == 0) {
      result = PyList_New(0);
    } else if (all != NULL) {
      PyObject* sep = PyUnicode_FromString("\n");
      result = PyUnicode_Split(all, sep, -1);
      Py_XDECREF(sep);
    }
    Py_XDECREF(all);
  }
  PyMem_Free(text);
  return result;
}

/* {in-neighbor rank: version}. */
static PyObject* py_window_versions(starling_window_t win) {
  int count = 0;
  starling_status_t status = starling_window_versions(win, NULL, NULL, 0, &count);
  if (status < 0 && count == 0) { starling_py_raise(status); return NULL; }
  int* ranks = (int*)PyMem_Malloc(sizeof(int) * (size_t)(count + 1));
  int64_t* versions = (int64_t*)PyMem_Malloc(sizeof(int64_t) * (size_t)(count + 1));
  PyObject* dict = NULL;
  if (!ranks || !versions) { PyErr_NoMemory(); goto done; }
  status = starling_window_versions(win, ranks, versions, count, &count);
  if (status < 0) { starling_py_raise(status); goto done; }
  dict = PyDict_New();
  for (int i = 0; dict != NULL && i < count; ++i) {
    PyObject* k = PyLong_FromLong(ranks[i]);
    PyObject* v = PyLong_FromLongLong(versions[i]);
    PyDict_SetItem(dict, k, v);
    Py_XDECREF(k);
    Py_XDECREF(v);
  }
done:
  PyMem_Free(ranks);
  PyMem_Free(versions);
  return dict;
}

/* starling_context_repair with the default topology (topo NULL) or topo; returns a dict
 * (old_rank, old_size, new_rank, new_size, old_to_new, failed). Runs without the GIL:
 * it waits for the other survivors. */
static PyObject* py_context_repair(starling_context_t ctx, starling_topology_t topo, int is_weighted) {
  starling_repair_options_t options = STARLING_REPAIR_OPTIONS_INIT;
  options.topology = topo;
  options.is_weighted = is_weighted;
  int old_to_new[4096], failed[4096];
  starling_repair_result_t result = STARLING_REPAIR_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = 4096;
  result.failed = failed;
  result.failed_capacity = 4096;
  starling_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = starling_context_repair(ctx, &options, &result);
  Py_END_ALLOW_THREADS
  if (status < 0) { starling_py_raise(status); return NULL; }
  const int dropped = result.num_failed < 4096 ? result.num_failed : 4096;
  return Py_BuildValue("{sisisisisNsN}", "old_rank", result.old_rank, "old_size", result.old_size, "new_rank",
                       result.new_rank, "new_size", result.new_size, "old_to_new",
                       starling_py_int_list(old_to_new, result.old_size < 4096 ? result.old_size : 4096), "failed",
                       starling_py_int_list(failed, dropped));
}

/* starling_context_grow: count processes at `ranks` (a list, or None: at the end),
 * running `command` with `args` (a list of str; command None: this process's program),
 * over `topo` (NULL: the current generator). Returns a dict (old_rank, old_size,
 * new_rank, new_size, old_to_new, joined). Runs without the GIL: it waits for the
 * other ranks and for the new processes to start. */
static PyObject* py_context_grow(starling_context_t ctx, int count, PyObject* ranks, PyObject* command, PyObject* args,
                                 starling_topology_t topo, int is_weighted) {
  starling_grow_options_t options = STARLING_GROW_OPTIONS_INIT;
  options.count = count;
  options.topology = topo;
  options.is_weighted = is_weighted;
  int places[1024];
  const char* argv[257];
  if (ranks != Py_None) {
    if (starling_py_read_ints(ranks, count, places, 1024, "ranks") < 0) return NULL;
    options.ranks = places;
  }
  if (command != Py_None) {
    options.command = PyUnicode_AsUTF8(command);
    if (!options.command) return NULL;
    const Py_ssize_t n = PySequence_Check(args) ? PySequence_Size(args) : -1;
    if (n < 0 || n > 256) {
      PyErr_SetString(PyExc_ValueError, "args must be a sequence of at most 256 str");
      return NULL;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_GetItem(args, i);  /* kept alive by `args` */
      argv[i] = item ? PyUnicode_AsUTF8(item) : NULL;
      Py_XDECREF(item);
      if (!argv[i]) return NULL;
    }
    argv[n] = NULL;
    options.argv = argv;
  }
  int old_to_new[4096], joined[1024];
  starling_grow_result_t result = STARLING_GROW_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = 4096;
  result.joined = joined;
  result.joined_capacity = 1024;
  starling_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = starling_context_grow(ctx, &options, &result);
  Py_END_ALLOW_THREADS
  if (status < 0) { starling_py_raise(status); return NULL; }
  return Py_BuildValue("{sisisisisNsN}", "old_rank", result.old_rank, "old_size", result.old_size, "new_rank",
                       result.new_rank, "new_size", result.new_size, "old_to_new",
                       starling_py_int_list(old_to_new, result.old_size < 4096 ? result.old_size : 4096), "joined",
                       starling_py_int_list(joined, count < 1024 ? count : 1024));
}

/* starling_context_shrink: `count` ranks leave, those of `ranks` (a list, or None: the
 * last count), over `topo` (NULL: the current generator, or the induced subgraph).
 * Returns a dict (old_rank, old_size, new_rank (-1: this rank left), new_size,
 * old_to_new, left). Runs without the GIL: it waits for the other ranks. */
static PyObject* py_context_shrink(starling_context_t ctx, int count, PyObject* ranks, starling_topology_t topo,
                                   int is_weighted) {
  starling_shrink_options_t options = STARLING_SHRINK_OPTIONS_INIT;
  options.count = count;
  options.topology = topo;
  options.is_weighted = is_weighted;
  int leaving[4096];
  if (ranks != Py_None) {
    if (starling_py_read_ints(ranks, count, leaving, 4096, "ranks") < 0) return NULL;
    options.ranks = leaving;
  }
  int old_to_new[4096], left[4096];
  starling_shrink_result_t result = STARLING_SHRINK_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = 4096;
  result.left = left;
  result.left_capacity = 4096;
  starling_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = starling_context_shrink(ctx, &options, &result);
  Py_END_ALLOW_THREADS
  if (status < 0) { starling_py_raise(status); return NULL; }
  const int gone = result.old_size - result.new_size;
  return Py_BuildValue("{sisisisisNsN}", "old_rank", result.old_rank, "old_size", result.old_size, "new_rank",
                       result.new_rank, "new_size", result.new_size, "old_to_new",
                       starling_py_int_list(old_to_new, result.old_size < 4096 ? result.old_size : 4096), "left",
                       starling_py_int_list(left, gone < 4096 ? gone : 4096));
}

static PyObject* py_get_stats(starling_context_t ctx) {
  starling_stats_t stats = STARLING_STATS_INIT;
  const starling_status_t status = starling_get_stats(ctx, &stats);
  if (status < 0) { starling_py_raise(status); return NULL; }
  static const char* const paths[] = {"none", "staged", "nccl"};
  const char* path = stats.gpu_path < 3 ? paths[stats.gpu_path] : "unknown";
  return Py_BuildValue("{sKsKsKsKsKsKsKsssKsKsKsKsKsKsK}", "operations", (unsigned long long)stats.operations,
                       "fused_operations", (unsigned long long)stats.fused_operations,
                       "fusion_groups", (unsigned long long)stats.fusion_groups,
                       "messages_sent", (unsigned long long)stats.messages_sent,
                       "bytes_sent", (unsigned long long)stats.bytes_sent,
                       "scratch_bytes", (unsigned long long)stats.scratch_bytes,
                       "staged_bytes", (unsigned long long)stats.staged_bytes, "gpu_path", path,
                       "bytes_before_compression", (unsigned long long)stats.bytes_before_compression,
                       "bytes_after_compression", (unsigned long long)stats.bytes_after_compression,
                       "messages_received", (unsigned long long)stats.messages_received,
                       "bytes_received", (unsigned long long)stats.bytes_received,
                       "blocked_ns", (unsigned long long)stats.blocked_ns,
                       "shm_bytes_sent", (unsigned long long)stats.shm_bytes_sent,
                       "shm_bytes_received", (unsigned long long)stats.shm_bytes_received);
}

static PyObject* py_get_peer_stats(starling_context_t ctx, int peer) {
  starling_peer_stats_t stats = STARLING_PEER_STATS_INIT;
  const starling_status_t status = starling_get_peer_stats(ctx, peer, &stats);
  if (status < 0) { starling_py_raise(status); return NULL; }
  return Py_BuildValue("{sKsKsKsKsKsKsKsKsK}", "messages_sent", (unsigned long long)stats.messages_sent,
                       "bytes_sent", (unsigned long long)stats.bytes_sent,
                       "messages_received", (unsigned long long)stats.messages_received,
                       "bytes_received", (unsigned long long)stats.bytes_received,
                       "waits", (unsigned long long)stats.waits,
                       "wait_ns", (unsigned long long)stats.wait_ns,
                       "last_wait_ns", (unsigned long long)stats.last_wait_ns,
                       "probe_latency_ns", (unsigned long long)stats.probe_latency_ns,
                       "probe_bytes_per_second", (unsigned long long)stats.probe_bytes_per_second);
}
%}
