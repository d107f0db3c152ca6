// starlingrun --fault-tolerant: notices ranks on this machine that end while the job
// runs, and says which rank and how. The ranks are found as mpirun's descendants in
// /proc (by their OMPI_COMM_WORLD_RANK); how one ended is read from its zombie's exit
// code when the poll sees it before mpirun reaps it, else reported as "killed or exited".
#ifndef STARLING_IMPL_LAUNCHER_RANK_WATCH_H_
#define STARLING_IMPL_LAUNCHER_RANK_WATCH_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace starling::launcher {

class RankWatch {
 public:
  // expected: how many ranks to look for (the full /proc walk stops once all are found).
  // marks: the STARLING_EXIT_MARKS directory where ranks that exit normally leave a
  // file named after their pid (impl/common/exit_mark.h); empty: none.
  RankWatch(pid_t mpirun, int expected, std::string marks = "")
      : root_(mpirun), expected_(expected), marks_(std::move(marks)) {}
  // Learns new ranks and returns one line per rank found dead since the last call. A
  // rank that vanished without a visible exit status is reported once another rank has
  // outlived it by `settle` (ranks that finish normally end together).
  std::vector<std::string> Poll(std::chrono::steady_clock::duration settle = std::chrono::milliseconds(200));
  // After mpirun exited: the last lines (ranks that ended `settle` before the last one).
  std::vector<std::string> Finish(std::chrono::steady_clock::duration settle = std::chrono::milliseconds(100));
  int died() const { return died_; }
  // After Finish: whether every process of the job ended as a fault-tolerant job may:
  // every rank was found here (none ran on another host), each either died (reported)
  // or exited with status 0, at least one exited so, and every exit mark left (by the
  // processes a grow started too, which the watch does not follow) says status 0.
  bool SurvivorsSucceeded() const;

 private:
  struct Rank {
    int rank = -1;
    bool gone = false;
    bool reported = false;
    std::string how;  // from the zombie's exit code, if seen
    std::chrono::steady_clock::time_point gone_at;
  };
  void Scan();
  bool ExitedNormally(pid_t pid) const;
  // The status in `pid`'s exit mark: -1 without a mark, -2 when it holds none.
  int MarkStatus(pid_t pid) const;
  pid_t root_;
  int expected_;
  std::string marks_;
  std::chrono::steady_clock::time_point next_scan_{};
  std::map<pid_t, Rank> ranks_;
  int died_ = 0;
};

}  // namespace starling::launcher

#endif  // STARLING_IMPL_LAUNCHER_RANK_WATCH_H_
