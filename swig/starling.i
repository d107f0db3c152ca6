// The SWIG interface shared by every language. It wraps the public C header as is;
// each language adds its own typemaps (DLPack tensors, status codes -> exceptions)
// in swig/<language>/, included below. Hand-written, idiomatic packages sit on top of
// the generated modules (bindings/<language>/).
#if defined(SWIGPYTHON)
%module(threads="1") _core
#elif defined(SWIGJAVA)
%module StarlingNative
#endif

%{
#include <starling/starling.h>
%}

%include <stdint.i>

// Language-specific typemaps and exception handling.
#if defined(SWIGPYTHON)
%include "python/starling_python.i"
#elif defined(SWIGJAVA)
%include "java/starling_java.i"
#endif

// DLPack's own header is not wrapped: tensors cross through the typemaps above.
#define STARLING_API
%include <starling/starling.h>
