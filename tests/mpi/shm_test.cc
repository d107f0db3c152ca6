// The shared-memory probe at context creation (issue 24's foundation): every pair of
// ranks on this host reports shm on in starling_config_string, or off with
// STARLING_SHM=0; the line goes with the context, and the probe leaves nothing in
// /dev/shm.
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "test_util.h"
#include "world.h"

namespace starling_test {
namespace {

bool ShmDisabled() {
  const char* v = std::getenv("STARLING_SHM");
  return v != nullptr && std::string(v) == "0";
}

// The "shm: ..." lines of the config string.
std::string ShmLines() {
  const std::string text = starling_config_string();
  std::string lines;
  size_t at = 0;
  while ((at = text.find("\nshm: ", at)) != std::string::npos) {
    const size_t end = text.find('\n', at + 1);
    lines += text.substr(at + 1, end - at);
    at = end;
  }
  return lines;
}

// Segment names of this user's Starling processes left in /dev/shm.
int Leftovers(const std::string& prefix) {
  int count = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir))
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) ++count;
    closedir(dir);
  }
  return count;
}

std::string Expected(int size) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  if (size == 1) return "shm: off (no other rank of this context on host ";
  if (ShmDisabled()) return "shm: off (STARLING_SHM=0)\n";
  return "shm: on (ranks 0-" + std::to_string(size - 1) + " on host " + std::string(host).substr(0, 63) + ")\n";
}

TEST(Shm, ConfigStringReportsEveryPair) {
  EXPECT_EQ(ShmLines(), "");  // no context yet
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  const std::string lines = ShmLines();
  EXPECT_EQ(lines.rfind(Expected(WorldSize()), 0), 0u) << lines;
  EXPECT_NE(std::string(starling_config_string()).find("STARLING_SHM=" + std::string(ShmDisabled() ? "0" : "1")),
            std::string::npos);
  ASSERT_OK(starling_context_destroy(ctx));
  EXPECT_EQ(ShmLines(), "") << "the line goes with its context";
}

TEST(Shm, OneLinePerContextAndNothingLeftBehind) {
  starling_context_t a, b;
  ASSERT_OK(starling_context_create(nullptr, &a));
  ASSERT_OK(starling_context_create(nullptr, &b));
  const std::string one = Expected(WorldSize());
  const std::string lines = ShmLines();
  if (WorldSize() > 1) EXPECT_EQ(lines, one + one);
  // Every probe segment was unlinked during creation (its peers mapped it, or its owner
  // removed it after the exchange): none of this job's is left. Other jobs may run
  // beside this one, so the check is by this job's rank-0 pid-based id only when alone.
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string prefix = "starling-u" + std::to_string(getuid()) + "-";
  const int left = Leftovers(prefix);
  int most = 0;
  MPI_Allreduce(&left, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(most, 0) << "probe segments left in /dev/shm (or another Starling job runs beside this test)";
  ASSERT_OK(starling_context_destroy(b));
  ASSERT_OK(starling_context_destroy(a));
}

TEST(Shm, SplitContextProbesItsOwnRanks) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks";
  starling_context_t world, half;
  ASSERT_OK(starling_context_create(nullptr, &world));
  const int color = WorldRank() % 2;
  ASSERT_OK(starling_context_split(world, color, WorldRank(), nullptr, &half));
  const int half_size = (WorldSize() + 1 - color) / 2;
  const std::string lines = ShmLines();
  const std::string first = Expected(WorldSize());
  ASSERT_EQ(lines.rfind(first, 0), 0u) << lines;
  EXPECT_EQ(lines.substr(first.size()).rfind(Expected(half_size), 0), 0u) << lines;
  ASSERT_OK(starling_context_destroy(half));
  ASSERT_OK(starling_context_destroy(world));
}

// Registered as an MPMD launch (mpi.shm_mixed.np3): rank 0 with STARLING_SHM=0, ranks 1
// and 2 with it on. Skipped in any other launch (every rank agrees on that).
TEST(ShmMixed, OneRankOffTurnsOffItsPairsOnly) {
  int off = ShmDisabled() ? 1 : 0, on_pattern = 0;
  int pattern = WorldRank() == 0 ? off : !off;  // 1 on every rank when exactly rank 0 is off
  MPI_Allreduce(&pattern, &on_pattern, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (WorldSize() != 3 || on_pattern != 1) GTEST_SKIP() << "needs rank 0 of 3 with STARLING_SHM=0";
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(ShmLines(), "shm: on (ranks 0-2 on host " + std::string(host).substr(0, 63) +
                            ") except off for 0<->1, 0<->2 (STARLING_SHM=0 on rank 0)\n");
  ASSERT_OK(starling_context_destroy(ctx));
}

}  // namespace
}  // namespace starling_test
