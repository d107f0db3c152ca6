// Growing a job (starling_context_grow): the current ranks start processes with
// MPI_Comm_spawn and both sides merge into one communicator, ordered as asked.
// Blocking MPI calls with MPI_ERRORS_RETURN; every failure throws Error.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace starling::transport {

// Collective over `comm` (the current ranks): starts `count` processes running
// `command` with `argv` (taken from rank `root`, started in root's working directory)
// and returns the merged intracommunicator: the current ranks first (in their order),
// then the new processes (the caller frees it). Error(kTimeout) on every rank if the new
// processes have not started and taken the port within limit_seconds (a program that
// exits or fails before creating its Starling context); nothing is changed then.
MPI_Comm SpawnMerged(MPI_Comm comm, int root, const std::string& command, const std::vector<std::string>& argv,
                     int count, double limit_seconds);

// The grow's limit when STARLING_TIMEOUT_SECONDS is 0 (no limit on operations): a new
// process that never joins must not hang the job.
constexpr double kDefaultGrowLimitSeconds = 300;

// In a process started by SpawnMerged (MPI_Comm_get_parent is set, and this process
// has not joined yet): the merged intracommunicator; else MPI_COMM_NULL. Once per process.
MPI_Comm JoinMerged();

// Collective over `comm`: root's bytes, on every rank.
void BroadcastBytes(MPI_Comm comm, int root, std::vector<char>* bytes);

// Collective over `comm`: a communicator of every rank, ordered by `key` (the caller
// frees it). Frees nothing.
MPI_Comm Reorder(MPI_Comm comm, int key);

// This process's executable (/proc/self/exe) and arguments (/proc/self/cmdline
// without its first entry).
std::string OwnExecutable();
std::vector<std::string> OwnArguments();

}  // namespace starling::transport
