# STARLING_SANITIZE: builds the library and every test program with a sanitizer.
#   address  AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer. UB is
#            fatal (-fno-sanitize-recover=all), so any finding fails the test that hit it.
#   thread   ThreadSanitizer.
#   (empty)  no sanitizer (the default).
# The two are separate builds (ASan and TSan cannot share a process). tests/sanitize/run.sh
# configures both, builds what they need and runs the chosen ctest subsets; a plain
# `ctest` in such a build directory works as well, since the runtime options below are
# part of every MPI test's environment.
set(STARLING_SANITIZE "" CACHE STRING
  "Sanitizer for the library and the tests: address (ASan+LSan+UBSan) or thread (TSan); empty for none")
set_property(CACHE STARLING_SANITIZE PROPERTY STRINGS "" address thread)

set(STARLING_SANITIZER_ENV "")      # runtime options, added to every MPI test's environment
set(STARLING_SANITIZER_PRELOAD "")  # prefix for an uninstrumented interpreter (python3)
set(STARLING_SANITIZER_INTERPRETER_ENV "")  # options that replace the above in such a run
if(STARLING_SANITIZE STREQUAL "")
  return()
endif()

set(supp_dir ${CMAKE_CURRENT_LIST_DIR})
if(STARLING_SANITIZE STREQUAL "address")
  set(flags -fsanitize=address,undefined -fno-sanitize-recover=all)
  set(runtime libasan.so)
  # Leak checking stays on for Starling's own programs; Open MPI's allocations that
  # live until exit are suppressed by library name in lsan.supp. That needs the whole
  # allocation stack: Open MPI is built without frame pointers, so the fast unwinder
  # stops early (or strays) inside it; the exact unwinder costs little here.
  set(asan_checks check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1)
  list(APPEND STARLING_SANITIZER_ENV
    "ASAN_OPTIONS=${asan_checks}:detect_leaks=1:fast_unwind_on_malloc=0"
    "LSAN_OPTIONS=suppressions=${supp_dir}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  # CPython keeps objects alive until exit by design (interned strings, module state),
  # so leak checking would report the interpreter, not Starling: off in python3 only.
  set(STARLING_SANITIZER_INTERPRETER_ENV "ASAN_OPTIONS=${asan_checks}:detect_leaks=0")
elseif(STARLING_SANITIZE STREQUAL "thread")
  set(flags -fsanitize=thread)
  set(runtime libtsan.so)
  # A larger history lets TSan restore the stack of an earlier access made inside Open
  # MPI, so tsan.supp can match it by library; without it the report has no stack.
  list(APPEND STARLING_SANITIZER_ENV
    "TSAN_OPTIONS=suppressions=${supp_dir}/tsan.supp:print_suppressions=0:second_deadlock_stack=1:history_size=7")
else()
  message(FATAL_ERROR "STARLING_SANITIZE must be empty, address or thread (got '${STARLING_SANITIZE}')")
endif()

# Frame pointers give complete stacks in reports at little cost.
add_compile_options(${flags} -fno-omit-frame-pointer)
add_link_options(${flags})

# CPython is not instrumented, so the sanitizer runtime must be the first library loaded
# into it: tests that start python3 put this prefix before the interpreter (the Java
# tests have no such prefix: run.sh builds sanitizer trees without Java). libstdc++
# comes with it because the runtime looks up the real __cxa_throw (which it wraps) when
# it starts, before python3 has loaded any C++; without it the first C++ exception
# thrown inside Starling stops the process.
set(preload "")
foreach(lib ${runtime} libstdc++.so)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${lib}
    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND preload ${path})
endforeach()
string(REPLACE ";" ":" preload "${preload}")
set(STARLING_SANITIZER_PRELOAD env LD_PRELOAD=${preload})
string(JOIN " " shown ${flags})
message(STATUS "Sanitizer: ${STARLING_SANITIZE} (${shown}); interpreters preload ${preload}")
