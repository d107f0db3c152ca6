// ULFM (User-Level Failure Mitigation): Open MPI 5's fault tolerance. Detected when
// Starling is built (mpi-ext.h declares MPIX_Comm_shrink: STARLING_HAVE_ULFM) and when
// it runs (the job was started with `mpirun --with-ft ulfm`: without it Open MPI kills
// the whole job when a rank dies, and the MPIX_ calls would only pretend to work).
#pragma once

#include <string>

namespace starling::transport {

// Built against an MPI with ULFM.
bool UlfmCompiled();
// Built with ULFM and this job runs with it enabled (MPI must be initialized). Read
// once: the MPI_T control variable mpi_ft_enable, or OMPI_MCA_mpi_ft_enable.
bool UlfmEnabled();
// "" when UlfmEnabled(), else what is missing and how to get it (for UNSUPPORTED).
std::string UlfmMissing();
// MPIX_ERR_PROC_FAILED, MPIX_ERR_PROC_FAILED_PENDING or MPIX_ERR_REVOKED.
bool IsFailureClass(int error_class);
// MPIX_ERR_PROC_FAILED_PENDING: a wildcard receive that stays posted.
bool IsPendingFailureClass(int error_class);

// Before MPI_Init in a job started with ULFM (OMPI_MCA_mpi_ft_enable set, as `mpirun
// --with-ft ulfm` does) and STARLING_FT_DETECTOR_SECONDS > 0: turns on ULFM's heartbeat
// failure detector with that timeout (MCA variables the user set are left alone).
// Throws INVALID_ARGUMENT for a bad value.
void ConfigureUlfmDetector();

// A job that survives deaths: a write to a dead peer's socket (Open MPI's TCP
// transport, between the jobs a grow joins) raises SIGPIPE, whose default action ends
// the writer, a survivor. Sets SIGPIPE to ignored when it has its default action (a
// handler or disposition the program chose stays); Python and the JVM ignore it already.
void IgnoreBrokenPipes();

// MPIX_Comm_revoke of a raw communicator (comm is an MPI_Comm; void* keeps <mpi.h> out
// of this header); nothing without ULFM.
void RevokeCommunicator(void* comm);

// MPIX_Comm_agree (a bitwise AND of *flag) over a raw communicator (an MPI_Comm*), its
// errors returned: MPI_SUCCESS, or an error code; one of a failure class (a member died
// before contributing) is raised alike on every live member. Returns when every live
// member has entered it. MPI_ERR_OTHER without ULFM.
int AgreeOnCommunicator(void* comm, int* flag);

}  // namespace starling::transport
