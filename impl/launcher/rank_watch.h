// starlingrun --fault-tolerant: notices ranks on this machine that end while the job
// runs, and says which rank and how. The ranks are mpirun's descendants in the
// launcher's process group, found through /proc (their OMPI_COMM_WORLD_RANK); how one
// ended is read from its zombie's exit code when the poll sees it before mpirun reaps
// it, else reported as "killed or exited".
#ifndef STARLING_IMPL_LAUNCHER_RANK_WATCH_H_
#define STARLING_IMPL_LAUNCHER_RANK_WATCH_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace starling::launcher {

class RankWatch {
 public:
  explicit RankWatch(pid_t group) : group_(group) {}
  // Learns new ranks and returns one line per rank found dead since the last call. A
  // rank that vanished without a visible exit status is reported only once it has been
  // gone for `settle` while the job still runs (ranks that finish normally end together
  // with mpirun).
  std::vector<std::string> Poll(std::chrono::steady_clock::duration settle = std::chrono::seconds(1));
  int died() const { return died_; }

 private:
  struct Rank {
    int rank = -1;
    bool gone = false;
    bool reported = false;
    std::string how;  // from the zombie's exit code, if seen
    std::chrono::steady_clock::time_point gone_at;
  };
  void Scan();
  pid_t group_;
  std::map<pid_t, Rank> ranks_;
  int died_ = 0;
};

}  // namespace starling::launcher

#endif  // STARLING_IMPL_LAUNCHER_RANK_WATCH_H_
