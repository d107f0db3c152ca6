// Ranks calling different collectives at the same moment (a programming error): rank 0
// calls kind A while every other rank calls kind B, on float32 tensors of the same size,
// for every ordered pair of distinct kinds, small (gathering paths) and large
// (agreement round, then ring or chain). Every rank must fail with
// STARLING_ERR_MISMATCH naming both operations, never hang or return a wrong result,
// and the context must stay usable: an allreduce right after gives the exact sum.
// Neighbor operations have no agreement round: a rank running one that does not hear
// from rank 0 may complete (its sources all made its call); every other rank must fail.
// Before the fix every classic kind meeting a large neighbor call crashed the process
// (the neighbor data, left unreceived, overflowed the next operation's receive).
// Under other topologies (NonDefaultTopologiesFailOnEveryRank) the context may be left
// unusable, but every rank fails promptly. So may it when every rank shares one host
// and a classic call (a round on the shared-memory board, which sends no message) meets
// a neighbor call: the ranks find it by announcing their stalls. Run with STARLING_SHM=0
// too, where every pair must leave the context usable.
#include <mpi.h>

#include <chrono>
#include <functional>
#include <sstream>

#include "test_util.h"

namespace starling_test {
namespace {

struct Collective {
  const char* name;      // as the error message names it
  bool neighbor;
  std::function<starling_status_t(starling_context_t, int rank, int size, int64_t n)> call;
};

// This rank's in-neighbors in the context's topology (the default exponential graph).
std::vector<int> Sources(starling_context_t ctx, int size) {
  std::vector<int> ranks(static_cast<size_t>(size));
  int count = -1;
  EXPECT_OK(starling_in_neighbors(ctx, ranks.data(), size, &count));
  ranks.resize(static_cast<size_t>(std::max(count, 0)));
  return ranks;
}

// Every element rank + 1: sums are exact in float32.
void Fill(Buffer& b, int rank) {
  for (size_t i = 0; i < b.numel(); ++i) b.set(i, rank + 1);
}

std::vector<Collective> Collectives() {
  return {
      {"allreduce", false,
       [](starling_context_t ctx, int rank, int, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
         Fill(in, rank);
         return starling_allreduce(ctx, &in.t, &out.t, STARLING_SUM, nullptr);
       }},
      {"local_allreduce", false,
       [](starling_context_t ctx, int rank, int, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
         Fill(in, rank);
         return starling_local_allreduce(ctx, &in.t, &out.t, STARLING_SUM, nullptr);
       }},
      {"allgather", false,
       [](starling_context_t ctx, int rank, int size, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n * size});
         Fill(in, rank);
         return starling_allgather(ctx, &in.t, &out.t, nullptr, nullptr);
       }},
      {"allgather", false,  // first dimensions that differ between ranks
       [](starling_context_t ctx, int rank, int size, int64_t n) {
         Buffer in(Kind::kF32, {n + rank}), out(Kind::kF32, {n * size + size * (size - 1) / 2});
         Fill(in, rank);
         return starling_allgather(ctx, &in.t, &out.t, nullptr, nullptr);
       }},
      {"allgather_first_dims", false,
       [](starling_context_t ctx, int rank, int size, int64_t n) {
         Buffer in(Kind::kF32, {n});
         Fill(in, rank);
         std::vector<int64_t> dims(static_cast<size_t>(size));
         return starling_allgather_first_dims(ctx, &in.t, dims.data(), nullptr);
       }},
      {"broadcast", false,
       [](starling_context_t ctx, int rank, int, int64_t n) {
         Buffer x(Kind::kF32, {n});
         Fill(x, rank);
         return starling_broadcast(ctx, &x.t, &x.t, 0, nullptr);
       }},
      {"alltoall", false,
       [](starling_context_t ctx, int rank, int, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
         Fill(in, rank);
         return starling_alltoall(ctx, &in.t, &out.t, nullptr, nullptr, nullptr);
       }},
      {"reduce_scatter", false,
       [](starling_context_t ctx, int rank, int size, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n / size});
         Fill(in, rank);
         return starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, STARLING_SUM, nullptr);
       }},
      {"barrier", false, [](starling_context_t ctx, int, int, int64_t) { return starling_barrier(ctx); }},
      {"neighbor_allreduce", true,
       [](starling_context_t ctx, int rank, int, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
         Fill(in, rank);
         return starling_neighbor_allreduce(ctx, &in.t, &out.t, nullptr);
       }},
      {"neighbor_allgather", true,
       [](starling_context_t ctx, int rank, int size, int64_t n) {
         Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n * static_cast<int64_t>(Sources(ctx, size).size())});
         Fill(in, rank);
         return starling_neighbor_allgather(ctx, &in.t, &out.t, nullptr, nullptr);
       }},
  };
}

bool HearsFromRankZero(starling_context_t ctx, int size) {
  const std::vector<int> sources = Sources(ctx, size);
  return std::find(sources.begin(), sources.end(), 0) != sources.end();
}

bool Names(const std::string& message, const char* op) { return message.find(std::string(op) + " #") != std::string::npos; }

class Mismatch : public ContextTest {
 protected:
  // Rank 0 calls `a`, the others `b`; returns what went wrong on this rank ("" if all
  // is as required). Recreates the context when it was left unusable, so one broken
  // pair does not hide the others.
  std::string RunPair(const Collective& a, const Collective& b, int64_t n) {
    const Collective& mine = rank == 0 ? a : b;
    const starling_status_t s = mine.call(ctx, rank, size, n);
    const std::string message = s == STARLING_SUCCESS ? "" : starling_last_error();
    std::ostringstream problem;
    // A neighbor operation whose sources all made the same call may complete.
    const bool may_succeed = mine.neighbor && rank != 0 && !HearsFromRankZero(ctx, size);
    if (s == STARLING_SUCCESS && !may_succeed) {
      problem << "succeeded (a wrong result)";
    } else if (s != STARLING_SUCCESS && s != STARLING_ERR_MISMATCH) {
      problem << "status " << s << ": " << message;
    } else if (s == STARLING_ERR_MISMATCH && std::string(a.name) == b.name &&
               message.find(a.name) == std::string::npos) {
      problem << "a message that does not name the operation: " << message;
    } else if (s == STARLING_ERR_MISMATCH && std::string(a.name) != b.name &&
               !(Names(message, a.name) && Names(message, b.name))) {
      problem << "a message that does not name both operations: " << message;
    }
    // The context must still work; after a board round met a neighbor call it may
    // instead fail at once with MISMATCH (a rank whose neighbor call completed learns
    // of the disagreement in this call).
    const After after = AllreduceAfter(n);
    const bool may_be_unusable = OnBoard() && a.neighbor != b.neighbor;
    const bool refused = after.status == STARLING_ERR_MISMATCH && after.seconds < 5.0;
    if (!after.exact && !(may_be_unusable && refused))
      problem << (problem.tellp() > 0 ? "; " : "") << "the allreduce after it gave "
              << (after.status == STARLING_SUCCESS ? "a wrong sum" : after.message);
    RecreateIfAnyBroken(after.exact);
    return problem.str();
  }

  // Whether this context's classic collectives go through the shared-memory board:
  // shared memory on, and (as in these tests) every rank on this host.
  bool OnBoard() const {
    const char* config = starling_config_string();
    const std::string text = config != nullptr ? config : "";
    return text.find("shm: on (") != std::string::npos && text.find("except") == std::string::npos;
  }

  // An allreduce of rank + 1 right after a pair: its status, whether the sum is exact,
  // and how long it took.
  struct After {
    starling_status_t status;
    std::string message;
    bool exact;
    double seconds;
  };
  After AllreduceAfter(int64_t n) {
    Buffer x(Kind::kF32, {n});
    Fill(x, rank);
    const auto start = std::chrono::steady_clock::now();
    const starling_status_t status = starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "after");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool exact = status == STARLING_SUCCESS;
    for (size_t i = 0; exact && i < x.numel(); ++i) exact = x.get(i) == size * (size + 1) / 2.0;
    return {status, status == STARLING_SUCCESS ? "" : starling_last_error(), exact, seconds};
  }

  // Collective: when the allreduce after a pair was not exact on some rank, every rank
  // destroys its context and creates a new one, so one broken pair does not hide the
  // others. Returns true if it did.
  bool RecreateIfAnyBroken(bool exact) {
    int broken = exact ? 0 : 1, any_broken = 0;
    MPI_Allreduce(&broken, &any_broken, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any_broken) return false;
    starling_context_destroy(ctx);
    ctx = nullptr;
    EXPECT_OK(starling_context_create(nullptr, &ctx));
    return true;
  }
};

std::string Describe(const Collective& a, const Collective& b, int64_t n, const std::string& problem) {
  std::ostringstream line;
  line << "rank 0 " << a.name << ", others " << b.name << ", " << n << " floats: " << problem;
  return line.str();
}

TEST_F(Mismatch, EveryPairOfCollectivesFailsOnEveryRank) {
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  const std::vector<Collective> all = Collectives();
  // 24 elements divide into 2, 3 and 4 blocks (96 B: gathering paths); 3072 (12 KiB:
  // alltoall's counts round, allgather's ring at two ranks); 24 Ki (96 KiB: an
  // agreement round, then ring or chain; neighbor data as a frame trailer).
  for (int64_t n : {int64_t{24}, int64_t{3072}, int64_t{24} << 10}) {
    for (size_t i = 0; i < all.size(); ++i) {
      for (size_t j = 0; j < all.size(); ++j) {
        if (i == j) continue;
        const std::string problem = RunPair(all[i], all[j], n);
        if (!problem.empty()) ADD_FAILURE() << Describe(all[i], all[j], n, problem) << " (pair " << i << ", " << j << ")";
      }
    }
  }
}

// Under the rings (any topology but the default exponential graph) a neighbor call may
// wait for a rank in a classic collective that never sends to it, and the reverse:
// no header of the other operation arrives, and the ranks find the disagreement by
// telling each other where they wait (STARLING_MISMATCH_CHECK_SECONDS, 0.1 s in this
// test). Every rank that cannot complete must fail with MISMATCH saying the ranks
// disagree, within a few seconds; the allreduce after it then either gives the
// exact sum or fails at once (the context is unusable after such a disagreement),
// never hangs or times out.
TEST_F(Mismatch, NonDefaultTopologiesFailOnEveryRank) {
  if (size < 3) GTEST_SKIP() << "needs three ranks (at two, the rings are the default graph)";
  const std::vector<Collective> all = Collectives();
  const std::pair<starling_ring_style_t, int64_t> rings[] = {{STARLING_RING_LEFT, 24}, {STARLING_RING_RIGHT, 24 << 10}};
  auto set_ring = [&](starling_ring_style_t style) {
    Topo topo;
    EXPECT_OK(starling_topology_ring(size, style, &topo.t));
    EXPECT_OK(starling_set_topology(ctx, topo.t, 0));
  };
  int disagreements = 0;
  for (const auto& [style, n] : rings) {
    set_ring(style);
    for (const Collective& a : all) {
      for (const Collective& b : all) {
        if (a.neighbor == b.neighbor) continue;  // one classic and one neighbor call
        const Collective& mine = rank == 0 ? a : b;
        const auto start = std::chrono::steady_clock::now();
        const starling_status_t s = mine.call(ctx, rank, size, n);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string message = s == STARLING_SUCCESS ? "" : starling_last_error();
        std::ostringstream problem;
        const bool may_succeed = mine.neighbor && rank != 0 && !HearsFromRankZero(ctx, size);
        if (s == STARLING_SUCCESS && !may_succeed) problem << "succeeded (a wrong result)";
        else if (s != STARLING_SUCCESS && s != STARLING_ERR_MISMATCH) problem << "status " << s << ": " << message;
        // Ranks that went on may reach this one's operation with a later one, and the
        // message then names that ("rank 0 called allreduce #3 while rank 2 called
        // broadcast #2"): it must say the ranks disagree.
        else if (s == STARLING_ERR_MISMATCH && message.find("ranks disagree") == std::string::npos &&
                 message.find("out of step") == std::string::npos &&
                 message.find("calling different operations") == std::string::npos)
          problem << "a message that does not say the ranks disagree: " << message;
        if (took > 5.0) problem << (problem.tellp() > 0 ? "; " : "") << "it took " << took << " s";
        if (message.find("STARLING_MISMATCH_CHECK_SECONDS") != std::string::npos) ++disagreements;
        // The next call: the exact sum, or MISMATCH at once (an unusable context).
        const After after = AllreduceAfter(n);
        if (after.status == STARLING_SUCCESS && !after.exact) problem << "; the allreduce after it gave a wrong sum";
        if (after.status != STARLING_SUCCESS && after.status != STARLING_ERR_MISMATCH)
          problem << "; the allreduce after it: status " << after.status << ": " << after.message;
        if (after.seconds > 5.0) problem << "; the allreduce after it took " << after.seconds << " s";
        if (!problem.str().empty())
          ADD_FAILURE() << Describe(a, b, n, problem.str()) << " (ring " << static_cast<int>(style) << ")";
        if (RecreateIfAnyBroken(after.exact)) {
          ASSERT_NE(ctx, nullptr);
          set_ring(style);
        }
      }
    }
  }
  // The new check must be what ended some of these calls (not only the headers).
  int total = 0;
  MPI_Allreduce(&disagreements, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(total, 0);
}

// One call of `name` on a tensor of `kind` and `shape` (96 bytes in every case below).
Collective Typed(const char* name, Kind kind, std::vector<int64_t> shape) {
  const std::string op = name;
  return {name, op.rfind("neighbor", 0) == 0, [op, kind, shape](starling_context_t ctx, int, int size, int64_t) {
            std::vector<int64_t> all_rows = shape;
            all_rows[0] *= size;
            Buffer in(kind, shape), out(kind, shape), gathered(kind, all_rows), block(kind, {shape[0] / size});
            if (op == "allreduce") return starling_allreduce(ctx, &in.t, &out.t, STARLING_SUM, nullptr);
            if (op == "broadcast") return starling_broadcast(ctx, &in.t, &in.t, 0, nullptr);
            if (op == "allgather") return starling_allgather(ctx, &in.t, &gathered.t, nullptr, nullptr);
            if (op == "alltoall") return starling_alltoall(ctx, &in.t, &out.t, nullptr, nullptr, nullptr);
            if (op == "reduce_scatter") return starling_reduce_scatter(ctx, &in.t, &block.t, nullptr, STARLING_SUM, nullptr);
            return starling_neighbor_allreduce(ctx, &in.t, &out.t, nullptr);
          }};
}

// The same number of bytes, another dtype or shape: still MISMATCH everywhere.
TEST_F(Mismatch, SameBytesOtherDtypeOrShape) {
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  const std::pair<Collective, Collective> cases[] = {
      {Typed("allreduce", Kind::kF32, {24}), Typed("allreduce", Kind::kI32, {24})},
      {Typed("allreduce", Kind::kF32, {24}), Typed("allreduce", Kind::kF64, {12})},
      {Typed("broadcast", Kind::kF32, {24}), Typed("broadcast", Kind::kU8, {96})},
      {Typed("allgather", Kind::kF32, {24}), Typed("allgather", Kind::kF32, {12, 2})},
      {Typed("allgather", Kind::kF32, {24}), Typed("allgather", Kind::kI16, {48})},
      {Typed("alltoall", Kind::kF32, {24}), Typed("alltoall", Kind::kI32, {24})},
      {Typed("reduce_scatter", Kind::kF32, {24}), Typed("reduce_scatter", Kind::kF64, {12})},
      {Typed("neighbor_allreduce", Kind::kF32, {24}), Typed("neighbor_allreduce", Kind::kI32, {24})},
      {Typed("allreduce", Kind::kF32, {24}), Typed("allgather", Kind::kF32, {24 / size})},
  };
  for (const auto& c : cases) {
    const std::string problem = RunPair(c.first, c.second, 24);
    if (!problem.empty()) ADD_FAILURE() << Describe(c.first, c.second, 24, problem);
  }
}

}  // namespace
}  // namespace starling_test
