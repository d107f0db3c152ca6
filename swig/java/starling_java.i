// Java typemaps for the shared interface (swig/starling.i). The generated module
// (package org.starling.internal) is a raw, 1:1 layer under the hand-written API in
// org.starling:
// - every starling_status_t < 0 throws org.starling.StarlingException carrying the
//   status and starling_last_error(); results >= 0 come back as int;
// - handles, DLTensor pointers and option structs cross as `long` (native addresses
//   made by the starling_java_* builders below and freed with starling_java_free);
// - output parameters are Java arrays the wrapper writes into;
// - first_dims, which a nonblocking call writes after it returns, is a direct ByteBuffer
//   the caller keeps alive until the request completes.
// Only the hand-written layer calls this module: it passes capacities equal to the
// array lengths it allocates, which the C functions trust.

%rename("%(strip:[starling_])s") "";
%rename("%(strip:[STARLING_])s", %$isconstant) "";
%rename("%(strip:[STARLING_])s", %$isenumitem) "";

%include "enumtypeunsafe.swg"
%javaconst(1);

%pragma(java) jniclasscode=%{
  static {
    org.starling.NativeLoader.load();
  }
%}

%{
#include <stdlib.h>
#include <string.h>

/* Throws org.starling.StarlingException(status, starling_last_error()). */
static void starling_java_throw_status(JNIEnv* jenv, starling_status_t status) {
  /* PEER_FAILED has its own subclass (it carries the failed ranks). */
  jclass cls = (*jenv)->FindClass(jenv, status == STARLING_ERR_PEER_FAILED ? "org/starling/PeerFailedException"
                                                                           : "org/starling/StarlingException");
  if (!cls) return; /* NoClassDefFoundError is pending */
  jmethodID ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(ILjava/lang/String;)V");
  if (!ctor) return;
  jstring message = (*jenv)->NewStringUTF(jenv, starling_last_error());
  if (!message) return;
  jobject error = (*jenv)->NewObject(jenv, cls, ctor, (jint)status, message);
  if (error) (*jenv)->Throw(jenv, (jthrowable)error);
}
%}

// Status: thrown in the "ret" typemap, after argout has released every Java array.
%typemap(ret) starling_status_t {
  if ($1 < 0) starling_java_throw_status(jenv, $1);
}

// ---- handles: opaque ids as long; `T*` outputs are long[] of at least one entry.
%define STARLING_JAVA_HANDLE(TYPE)
%typemap(jni) TYPE "jlong"
%typemap(jtype) TYPE "long"
%typemap(jstype) TYPE "long"
%typemap(javain) TYPE "$javainput"
%typemap(in) TYPE %{ $1 = ($1_ltype)(uintptr_t)$input; %}
%typemap(jni) TYPE* "jlongArray"
%typemap(jtype) TYPE* "long[]"
%typemap(jstype) TYPE* "long[]"
%typemap(javain) TYPE* "$javainput"
%typemap(in) TYPE* (TYPE temp = NULL) {
  if (!$input || JCALL1(GetArrayLength, jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "handle output needs a long[1]");
    return $null;
  }
  $1 = &temp;
}
%typemap(argout) TYPE* {
  {
    jlong value = (jlong)(uintptr_t)temp$argnum;
    JCALL4(SetLongArrayRegion, jenv, $input, 0, 1, &value);
  }
}
%enddef
STARLING_JAVA_HANDLE(starling_context_t)
STARLING_JAVA_HANDLE(starling_request_t)
STARLING_JAVA_HANDLE(starling_topology_t)
STARLING_JAVA_HANDLE(starling_schedule_t)
STARLING_JAVA_HANDLE(starling_window_t)

// ---- native structs built by the helpers below: passed as their address.
%define STARLING_JAVA_ADDRESS(TYPE)
%typemap(jni) TYPE "jlong"
%typemap(jtype) TYPE "long"
%typemap(jstype) TYPE "long"
%typemap(javain) TYPE "$javainput"
%typemap(in) TYPE %{ $1 = ($1_ltype)(uintptr_t)$input; %}
%enddef
STARLING_JAVA_ADDRESS(DLTensor*)
STARLING_JAVA_ADDRESS(const DLTensor*)
STARLING_JAVA_ADDRESS(const starling_context_options_t*)
STARLING_JAVA_ADDRESS(const starling_neighbor_args_t*)
STARLING_JAVA_ADDRESS(const starling_compression_t*)
STARLING_JAVA_ADDRESS(const starling_window_args_t*)
STARLING_JAVA_ADDRESS(const starling_window_update_args_t*)
%ignore starling_context_options;
%ignore starling_neighbor_args;
%ignore starling_compression;
%ignore starling_window_args;
%ignore starling_window_update_args;
%ignore starling_stats;
%ignore starling_peer_stats;
%ignore starling_probe_args;
%ignore starling_probe_peers;
// Fault tolerance (ULFM): starling_fault_tolerant and starling_joined as they are;
// starling_context_repair, _grow and _shrink through starling_java_context_repair, _grow
// and _shrink below (their structs carry arrays).
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
// starling_context_split through starling_java_context_split below (options struct).
%ignore starling_split_options;
%ignore starling_context_split;
// reduce_scatter and alltoall through the helpers below: their counts are int64_t*,
// which SWIG's cast calls long long* (a different pointer type in C on LP64).
%ignore starling_reduce_scatter;
%ignore starling_reduce_scatter_nonblocking;
%ignore starling_alltoall;
%ignore starling_alltoall_nonblocking;

// ---- primitive arrays: inputs (const T*) are read, outputs (T*) copied back. NULL
// stays NULL (the C functions accept it where the capacity is 0).
%define STARLING_JAVA_ARRAY(CTYPE, JNITYPE, JNIARRAY, JAVATYPE, FN)
%typemap(jni) CTYPE*, const CTYPE* "JNIARRAY"
%typemap(jtype) CTYPE*, const CTYPE* "JAVATYPE[]"
%typemap(jstype) CTYPE*, const CTYPE* "JAVATYPE[]"
%typemap(javain) CTYPE*, const CTYPE* "$javainput"
%typemap(in) CTYPE*, const CTYPE* {
  $1 = $input ? ($1_ltype)JCALL2(Get##FN##ArrayElements, jenv, $input, NULL) : NULL;
  if ($input && !$1) return $null; /* OutOfMemoryError is pending */
}
%typemap(argout) CTYPE* {
  if ($1) JCALL3(Release##FN##ArrayElements, jenv, $input, (JNITYPE*)$1, 0);
}
%typemap(argout) const CTYPE* {
  if ($1) JCALL3(Release##FN##ArrayElements, jenv, $input, (JNITYPE*)$1, JNI_ABORT);
}
%enddef
STARLING_JAVA_ARRAY(int, jint, jintArray, int, Int)
STARLING_JAVA_ARRAY(double, jdouble, jdoubleArray, double, Double)
STARLING_JAVA_ARRAY(int64_t, jlong, jlongArray, long, Long)
STARLING_JAVA_ARRAY(size_t, jlong, jlongArray, long, Long)
STARLING_JAVA_ARRAY(long long, jlong, jlongArray, long, Long)

// first_dims: a direct ByteBuffer (native order, 8 bytes per entry), because a
// nonblocking allgather writes it after the call returns.
%typemap(jni) int64_t* first_dims "jobject"
%typemap(jtype) int64_t* first_dims "java.nio.ByteBuffer"
%typemap(jstype) int64_t* first_dims "java.nio.ByteBuffer"
%typemap(javain) int64_t* first_dims "$javainput"
%typemap(in) int64_t* first_dims {
  $1 = $input ? (int64_t*)JCALL1(GetDirectBufferAddress, jenv, $input) : NULL;
  if ($input && !$1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "first_dims must be a direct ByteBuffer");
    return $null;
  }
}
%typemap(argout) int64_t* first_dims ""

// window_names: the text lands in a byte[] whose length is the capacity.
%typemap(jni) (char* buffer, size_t capacity) "jbyteArray"
%typemap(jtype) (char* buffer, size_t capacity) "byte[]"
%typemap(jstype) (char* buffer, size_t capacity) "byte[]"
%typemap(javain) (char* buffer, size_t capacity) "$javainput"
%typemap(in) (char* buffer, size_t capacity) {
  $1 = $input ? (char*)JCALL2(GetByteArrayElements, jenv, $input, NULL) : NULL;
  if ($input && !$1) return $null;
  $2 = $input ? (size_t)JCALL1(GetArrayLength, jenv, $input) : 0;
}
%typemap(argout) (char* buffer, size_t capacity) {
  if ($1) JCALL3(ReleaseByteArrayElements, jenv, $input, (jbyte*)$1, 0);
}

// DLDataType by value: int[] {code, bits, lanes}.
%typemap(jni) DLDataType "jintArray"
%typemap(jtype) DLDataType "int[]"
%typemap(jstype) DLDataType "int[]"
%typemap(javain) DLDataType "$javainput"
%typemap(in) DLDataType {
  {
    jint v[3];
    if (!$input || JCALL1(GetArrayLength, jenv, $input) != 3) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "dtype must be int[] {code, bits, lanes}");
      return $null;
    }
    JCALL4(GetIntArrayRegion, jenv, $input, 0, 3, v);
    $1.code = (uint8_t)v[0];
    $1.bits = (uint8_t)v[1];
    $1.lanes = (uint16_t)v[2];
  }
}

// Stats: long[] of at least 8 entries, in the struct's field order (as many as fit,
// up to all 15).
%typemap(jni) starling_stats_t* out "jlongArray"
%typemap(jtype) starling_stats_t* out "long[]"
%typemap(jstype) starling_stats_t* out "long[]"
%typemap(javain) starling_stats_t* out "$javainput"
%typemap(in) starling_stats_t* out (starling_stats_t temp = STARLING_STATS_INIT) {
  if (!$input || JCALL1(GetArrayLength, jenv, $input) < 8) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "stats output needs a long[8]");
    return $null;
  }
  $1 = &temp;
}
%typemap(argout) starling_stats_t* out {
  {
    jlong v[15] = {(jlong)temp$argnum.operations, (jlong)temp$argnum.fused_operations,
                   (jlong)temp$argnum.fusion_groups, (jlong)temp$argnum.messages_sent,
                   (jlong)temp$argnum.bytes_sent, (jlong)temp$argnum.scratch_bytes,
                   (jlong)temp$argnum.staged_bytes, (jlong)temp$argnum.gpu_path,
                   (jlong)temp$argnum.bytes_before_compression, (jlong)temp$argnum.bytes_after_compression,
                   (jlong)temp$argnum.messages_received, (jlong)temp$argnum.bytes_received,
                   (jlong)temp$argnum.blocked_ns, (jlong)temp$argnum.shm_bytes_sent,
                   (jlong)temp$argnum.shm_bytes_received};
    const jsize n = JCALL1(GetArrayLength, jenv, $input);
    JCALL4(SetLongArrayRegion, jenv, $input, 0, n < 15 ? n : 15, v);
  }
}

// Peer stats: a long[9] in the struct's field order.
%typemap(jni) starling_peer_stats_t* out "jlongArray"
%typemap(jtype) starling_peer_stats_t* out "long[]"
%typemap(jstype) starling_peer_stats_t* out "long[]"
%typemap(javain) starling_peer_stats_t* out "$javainput"
%typemap(in) starling_peer_stats_t* out (starling_peer_stats_t temp = STARLING_PEER_STATS_INIT) {
  if (!$input || JCALL1(GetArrayLength, jenv, $input) < 9) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "peer stats output needs a long[9]");
    return $null;
  }
  $1 = &temp;
}
%typemap(argout) starling_peer_stats_t* out {
  {
    jlong v[9] = {(jlong)temp$argnum.messages_sent, (jlong)temp$argnum.bytes_sent,
                  (jlong)temp$argnum.messages_received, (jlong)temp$argnum.bytes_received,
                  (jlong)temp$argnum.waits, (jlong)temp$argnum.wait_ns, (jlong)temp$argnum.last_wait_ns,
                  (jlong)temp$argnum.probe_latency_ns, (jlong)temp$argnum.probe_bytes_per_second};
    JCALL4(SetLongArrayRegion, jenv, $input, 0, 9, v);
  }
}

// CUDA streams: a cudaStream_t crosses as long (0: the legacy default stream);
// starling_get_cuda_stream writes it into a long[1].
%typemap(jni) void* stream "jlong"
%typemap(jtype) void* stream "long"
%typemap(jstype) void* stream "long"
%typemap(javain) void* stream "$javainput"
%typemap(in) void* stream %{ $1 = (void*)(uintptr_t)$input; %}
%typemap(jni) void** out "jlongArray"
%typemap(jtype) void** out "long[]"
%typemap(jstype) void** out "long[]"
%typemap(javain) void** out "$javainput"
%typemap(in) void** out (void* temp = NULL) {
  if (!$input || JCALL1(GetArrayLength, jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "stream output needs a long[1]");
    return $null;
  }
  $1 = &temp;
}
%typemap(argout) void** out {
  {
    jlong value = (jlong)(uintptr_t)temp$argnum;
    JCALL4(SetLongArrayRegion, jenv, $input, 0, 1, &value);
  }
}

// starling_gpu_path's text: written into a String[1].
%typemap(jni) const char** out "jobjectArray"
%typemap(jtype) const char** out "String[]"
%typemap(jstype) const char** out "String[]"
%typemap(javain) const char** out "$javainput"
%typemap(in) const char** out (const char* temp = NULL) {
  if (!$input || JCALL1(GetArrayLength, jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "text output needs a String[1]");
    return $null;
  }
  $1 = ($1_ltype)&temp;
}
%typemap(argout) const char** out {
  if (temp$argnum) {
    jstring text = JCALL1(NewStringUTF, jenv, temp$argnum);
    if (text) JCALL3(SetObjectArrayElement, jenv, $input, 0, text);
  }
}

// ---- builders for the native structs above (the ABI's pointer-bearing structs).
// Each returns an address for starling_java_free, or 0 on bad input or no memory; the
// Java layer validates first, these checks only keep the JVM safe.

// A direct java.nio.ByteBuffer: its address and capacity in bytes.
%ignore starling_java_buffer;
%typemap(jni) starling_java_buffer_t "jobject"
%typemap(jtype) starling_java_buffer_t "java.nio.ByteBuffer"
%typemap(jstype) starling_java_buffer_t "java.nio.ByteBuffer"
%typemap(javain) starling_java_buffer_t "$javainput"
%typemap(in) starling_java_buffer_t {
  $1.address = $input ? (char*)JCALL1(GetDirectBufferAddress, jenv, $input) : NULL;
  if (!$1.address) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "expected a direct ByteBuffer");
    return $null;
  }
  $1.capacity = (int64_t)JCALL1(GetDirectBufferCapacity, jenv, $input);
}

// (array, length) pairs for the builders.
%define STARLING_JAVA_IN_ARRAY(CTYPE, JNITYPE, JNIARRAY, JAVATYPE, FN)
%typemap(jni) (const CTYPE* IN_ARRAY, int IN_LENGTH) "JNIARRAY"
%typemap(jtype) (const CTYPE* IN_ARRAY, int IN_LENGTH) "JAVATYPE[]"
%typemap(jstype) (const CTYPE* IN_ARRAY, int IN_LENGTH) "JAVATYPE[]"
%typemap(javain) (const CTYPE* IN_ARRAY, int IN_LENGTH) "$javainput"
%typemap(in) (const CTYPE* IN_ARRAY, int IN_LENGTH) {
  $1 = $input ? ($1_ltype)JCALL2(Get##FN##ArrayElements, jenv, $input, NULL) : NULL;
  if ($input && !$1) return $null;
  $2 = $input ? (int)JCALL1(GetArrayLength, jenv, $input) : -1;
}
%typemap(argout) (const CTYPE* IN_ARRAY, int IN_LENGTH) {
  if ($1) JCALL3(Release##FN##ArrayElements, jenv, $input, (JNITYPE*)$1, JNI_ABORT);
}
%enddef
STARLING_JAVA_IN_ARRAY(int, jint, jintArray, int, Int)
STARLING_JAVA_IN_ARRAY(double, jdouble, jdoubleArray, double, Double)
STARLING_JAVA_IN_ARRAY(long long, jlong, jlongArray, long, Long)
%apply (const long long* IN_ARRAY, int IN_LENGTH) { (const long long* shape, int ndim) };
%apply (const int* IN_ARRAY, int IN_LENGTH) {
  (const int* source_ranks, int num_sources), (const int* destination_ranks, int num_destinations),
  (const int* ranks, int num_ranks) };
%apply (const double* IN_ARRAY, int IN_LENGTH) {
  (const double* source_weights, int num_source_weights),
  (const double* destination_weights, int num_destination_weights),
  (const double* weights, int num_weights),
  (const double* link_seconds, int num_link_seconds) };

%{
#include "builders.h"
%}
%include "builders.h"

// ---- reduce_scatter and alltoall (counts as long[]; null: equal blocks).
%inline %{
starling_status_t starling_java_reduce_scatter(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                               const long long* counts, int op, const char* name) {
  return starling_reduce_scatter(ctx, in, out, (const int64_t*)counts, (starling_reduce_op_t)op, name);
}
starling_status_t starling_java_reduce_scatter_nonblocking(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                           const long long* counts, int op, const char* name,
                                                           starling_request_t* req) {
  return starling_reduce_scatter_nonblocking(ctx, in, out, (const int64_t*)counts, (starling_reduce_op_t)op, name,
                                             req);
}
starling_status_t starling_java_alltoall(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                         const long long* send_counts, const long long* recv_counts,
                                         const char* name) {
  return starling_alltoall(ctx, in, out, (const int64_t*)send_counts, (const int64_t*)recv_counts, name);
}
starling_status_t starling_java_alltoall_nonblocking(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                     const long long* send_counts, const long long* recv_counts,
                                                     const char* name, starling_request_t* req) {
  return starling_alltoall_nonblocking(ctx, in, out, (const int64_t*)send_counts, (const int64_t*)recv_counts, name,
                                       req);
}
%}

// ---- starling_context_split: out[0] = the new context, or 0 for STARLING_SPLIT_UNDEFINED.
%inline %{
starling_status_t starling_java_context_split(starling_context_t ctx, int color, int key, int nodes_per_machine,
                                              starling_context_t* out) {
  starling_split_options_t options = STARLING_SPLIT_OPTIONS_INIT;
  options.nodes_per_machine = nodes_per_machine;
  return starling_context_split(ctx, color, key, &options, out);
}
%}

%inline %{
/* starling_probe_peers with flat arguments; the Java layer reads the figures back from
 * the peer stats. bulk_bytes >= 0 (checked by the Java layer). */
starling_status_t starling_java_probe_peers(starling_context_t ctx, int repetitions, int64_t bulk_bytes) {
  starling_probe_args_t args = STARLING_PROBE_ARGS_INIT;
  args.repetitions = repetitions;
  args.bulk_bytes = (uint64_t)bulk_bytes;
  return starling_probe_peers(ctx, &args, NULL, NULL, 0);
}
%}

// ---- starling_context_repair (after the array typemaps it uses).
%inline %{
/* starling_context_repair with the given topology (0: the default) for the Java layer:
 * info[5] = {old_rank, old_size, new_rank, new_size, num_failed}; old_to_new and failed
 * are filled up to their capacities (the Java layer passes its arrays' lengths). */
starling_status_t starling_java_context_repair(starling_context_t ctx, starling_topology_t topology, int is_weighted,
                                               int* info, int* old_to_new, int old_to_new_capacity, int* failed,
                                               int failed_capacity) {
  starling_repair_options_t options = STARLING_REPAIR_OPTIONS_INIT;
  options.topology = topology;
  options.is_weighted = is_weighted;
  starling_repair_result_t result = STARLING_REPAIR_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = old_to_new_capacity;
  result.failed = failed;
  result.failed_capacity = failed_capacity;
  const starling_status_t status = starling_context_repair(ctx, &options, &result);
  if (status >= 0 && info) {
    info[0] = result.old_rank;
    info[1] = result.old_size;
    info[2] = result.new_rank;
    info[3] = result.new_size;
    info[4] = result.num_failed;
  }
  return status;
}
%}

// ---- starling_context_grow: the new processes run this JVM's own command line.
%inline %{
/* starling_context_grow with count, ranks (NULL: after the current ranks) and topology
 * (0: the current generator) for the Java layer: info[4] = {old_rank, old_size,
 * new_rank, new_size}; old_to_new and joined are filled up to their capacities. */
starling_status_t starling_java_context_grow(starling_context_t ctx, int count, const int* ranks,
                                             starling_topology_t topology, int is_weighted, int* info,
                                             int* old_to_new, int old_to_new_capacity, int* joined,
                                             int joined_capacity) {
  starling_grow_options_t options = STARLING_GROW_OPTIONS_INIT;
  options.count = count;
  options.ranks = ranks;
  options.topology = topology;
  options.is_weighted = is_weighted;
  starling_grow_result_t result = STARLING_GROW_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = old_to_new_capacity;
  result.joined = joined;
  result.joined_capacity = joined_capacity;
  const starling_status_t status = starling_context_grow(ctx, &options, &result);
  if (status >= 0 && info) {
    info[0] = result.old_rank;
    info[1] = result.old_size;
    info[2] = result.new_rank;
    info[3] = result.new_size;
  }
  return status;
}
%}

// ---- starling_context_shrink
%inline %{
/* starling_context_shrink with count, ranks (NULL: the last count) and topology (0: the
 * current generator, or the induced subgraph) for the Java layer: info[4] = {old_rank,
 * old_size, new_rank (-1: left), new_size}; old_to_new and left are filled up to their
 * capacities. */
starling_status_t starling_java_context_shrink(starling_context_t ctx, int count, const int* ranks,
                                               starling_topology_t topology, int is_weighted, int* info,
                                               int* old_to_new, int old_to_new_capacity, int* left,
                                               int left_capacity) {
  starling_shrink_options_t options = STARLING_SHRINK_OPTIONS_INIT;
  options.count = count;
  options.ranks = ranks;
  options.topology = topology;
  options.is_weighted = is_weighted;
  starling_shrink_result_t result = STARLING_SHRINK_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = old_to_new_capacity;
  result.left = left;
  result.left_capacity = left_capacity;
  const starling_status_t status = starling_context_shrink(ctx, &options, &result);
  if (status >= 0 && info) {
    info[0] = result.old_rank;
    info[1] = result.old_size;
    info[2] = result.new_rank;
    info[3] = result.new_size;
  }
  return status;
}
%}
