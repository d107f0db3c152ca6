# Included from the top-level CMakeLists.txt (enable_language must run at the top level):
# decides whether the CUDA device plugin (libstarling_cuda.so, this directory) is built.
#   STARLING_WITH_CUDA=AUTO  build it when a CUDA compiler is found (the default)
#   STARLING_WITH_CUDA=ON    fail the configure without one
#   STARLING_WITH_CUDA=OFF   never build it
# Sets STARLING_BUILD_CUDA_PLUGIN.
set(STARLING_WITH_CUDA AUTO CACHE STRING "Build the CUDA device plugin libstarling_cuda.so: AUTO, ON or OFF")
set_property(CACHE STARLING_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${STARLING_WITH_CUDA}" _starling_cuda_mode)
if(NOT _starling_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STARLING_WITH_CUDA must be AUTO, ON or OFF, not '${STARLING_WITH_CUDA}'")
endif()

set(STARLING_BUILD_CUDA_PLUGIN OFF)
set(_starling_cuda_why "STARLING_WITH_CUDA=OFF")
# Fuzzing builds add clang-only flags to every compile, which nvcc would hand to its
# host compiler (g++): no plugin there unless asked for.
if(_starling_cuda_mode STREQUAL "AUTO" AND STARLING_FUZZ)
  set(_starling_cuda_mode OFF)
  set(_starling_cuda_why "STARLING_FUZZ build")
endif()
if(NOT _starling_cuda_mode STREQUAL "OFF")
  # nvcc is often not on PATH: fall back to the usual toolkit location.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(_starling_nvcc_on_path nvcc)
    if(NOT _starling_nvcc_on_path AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Turing (T4), Ampere and Hopper (SASS, plus PTX that newer GPUs compile at load
    # time). CUDA 13 dropped Volta (sm_70); a CUDA 12 build may add 70.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "75;80;90" CACHE STRING "GPU architectures of the CUDA plugin")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # NCCL is loaded at run time; its header gives the types and enums.
    find_path(STARLING_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(STARLING_NCCL_INCLUDE_DIR)
      set(STARLING_BUILD_CUDA_PLUGIN ON)
    else()
      set(_starling_cuda_why "nccl.h not found (set STARLING_NCCL_INCLUDE_DIR)")
    endif()
  else()
    set(_starling_cuda_why "no CUDA compiler (nvcc) found; set CMAKE_CUDA_COMPILER")
  endif()
  if(NOT STARLING_BUILD_CUDA_PLUGIN AND _starling_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "STARLING_WITH_CUDA=ON, but the CUDA plugin cannot be built: ${_starling_cuda_why}")
  endif()
endif()

if(STARLING_BUILD_CUDA_PLUGIN)
  message(STATUS "CUDA plugin libstarling_cuda.so: built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "CUDA plugin libstarling_cuda.so: not built (${_starling_cuda_why})")
endif()
