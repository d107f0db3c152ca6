// How `starlingrun --fault-tolerant` tells a rank that ended normally from one that died.
// Ranks are children of Open MPI's daemon, so the launcher cannot wait for them and
// rarely sees their exit status; with STARLING_EXIT_MARKS naming a directory (the
// launcher sets it), a process that created a context leaves there, when it exits
// normally (exit() or a return from main, also Python's), a file named after its pid
// holding its exit status in decimal (empty where the C library cannot tell it: not
// glibc). A killed or crashed process leaves none.
#pragma once

namespace starling {

// Registers the exit handler once per process when STARLING_EXIT_MARKS is set. Never
// fails: a directory that cannot be written (e.g. a remote host's) is ignored.
void ArmExitMark();

}  // namespace starling
