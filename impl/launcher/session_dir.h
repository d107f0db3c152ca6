// Open MPI 5's mpirun keeps its session directory in <tmpdir>/ompi.<its pid> and removes
// it when it ends. One that is killed (SIGKILL, a timeout, the OOM killer) leaves it, and
// a later mpirun that is given the same pid refuses to start: "The PMIx server's listener
// thread failed to start" (its PMIx finds the old rendezvous files). Pids wrap at 32768
// on many systems, so a machine that runs thousands of jobs meets this by chance.
#pragma once

#include <sys/types.h>

#include <string>

namespace starling::launcher {

// The directory Open MPI 5's mpirun with this pid uses: $TMPDIR, $TEMP, $TMP or /tmp,
// then ompi.<pid> (Open MPI's own order).
std::string SessionDirFor(pid_t pid);

// Removes `dir` and everything below it if it is a directory (not a link) owned by this
// user. Returns false only if it was there and could not be removed entirely.
// Call it for the pid that is about to exec mpirun: no live process can own that directory.
bool RemoveStaleSessionDir(const std::string& dir);

}  // namespace starling::launcher
