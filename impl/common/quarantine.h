// Memory that MPI may still read or write after an operation was abandoned (a timeout,
// an abort, a dead peer) must never be freed. It is kept here until the process ends:
// still reachable, so leak checkers report it as held (which it is), not as lost.
#pragma once

#include <memory>

namespace starling {

void Quarantine(std::shared_ptr<void> object);

}  // namespace starling
