# starling_add_mpi_test(): registers a program run under mpiexec with 1..n ranks. Every
# mpiexec runs under timeout(1) so a hang is a failure, never a stuck CI.
set(STARLING_MPI_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_orte_base_help_aggregate=0
  OMPI_MCA_hwloc_base_binding_policy=none
  # Open MPI 5 (PRRTE) ignores the OMPI_MCA_ oversubscription variable above.
  PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
  ${STARLING_SANITIZER_ENV})
find_program(TIMEOUT_EXECUTABLE timeout REQUIRED)

# starling_add_mpi_test(<name> COMMAND <exe> [args...] RANKS <n...> [TIMEOUT s] [ENV k=v...]
#                       [PREFIX mpi] [LABEL mpi...] [WORKING_DIRECTORY dir])
# registers <PREFIX>.<name>.np<n> for every n, run as `timeout mpiexec -n n <command>`.
function(starling_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;PREFIX;WORKING_DIRECTORY" "COMMAND;RANKS;ENV;LABEL" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 240)
  endif()
  if(NOT ARG_PREFIX)
    set(ARG_PREFIX mpi)
  endif()
  if(NOT ARG_LABEL)
    set(ARG_LABEL mpi)
  endif()
  if(NOT ARG_WORKING_DIRECTORY)
    set(ARG_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  foreach(n IN LISTS ARG_RANKS)
    set(test ${ARG_PREFIX}.${name}.np${n})
    add_test(NAME ${test}
      COMMAND ${TIMEOUT_EXECUTABLE} -k 10 ${ARG_TIMEOUT}
              ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${MPIEXEC_PREFLAGS} ${ARG_COMMAND}
      WORKING_DIRECTORY ${ARG_WORKING_DIRECTORY})
    set_tests_properties(${test} PROPERTIES
      LABELS "${ARG_LABEL}" PROCESSORS ${n} TIMEOUT ${ARG_TIMEOUT}
      ENVIRONMENT "${STARLING_MPI_ENV};${ARG_ENV}")
  endforeach()
endfunction()
