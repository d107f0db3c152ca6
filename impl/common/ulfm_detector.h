// ULFM's heartbeat failure detector, as Starling configures it (shared by the library,
// which sets these before it initializes MPI in a job started with ULFM, and by
// `starlingrun --fault-tolerant`, which passes them to mpirun). Without it Open MPI 5
// learns of a death only from its launcher's notice (PRRTE, through PMIx): a single
// path with no deadline; on shared memory no message to the dead rank ever fails. The
// detector runs on a thread of its own in every rank: each rank observes the one
// before it in MPI_COMM_WORLD (heartbeat every `period` seconds) and declares it
// failed after `timeout` seconds of silence, which ULFM then broadcasts to everyone.
// So a death (or a rank stopped or hung that long) is known within about timeout +
// period even where the launcher's notice is late or lost. Users override any of
// these with the usual OMPI_MCA_<name> variable or `--mca <name> <value>`.
#pragma once

namespace starling {

struct UlfmDetectorSetting {
  const char* name;   // an Open MPI MCA parameter
  const char* value;
};

inline constexpr UlfmDetectorSetting kUlfmDetectorSettings[] = {
    {"mpi_ft_detector", "true"},
    {"mpi_ft_detector_thread", "true"},  // heartbeats keep time while the rank computes
    {"mpi_ft_detector_period", "0.1"},
    {"mpi_ft_detector_timeout", "0.5"},  // silence before a rank is declared failed
};

}  // namespace starling
