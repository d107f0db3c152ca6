#include "bench_util.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace bench {
namespace {

double TimeBatch(const std::function<void()>& fn, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < calls; ++i) fn();
  double elapsed = MPI_Wtime() - start;
  // The slowest rank defines the time of a collective.
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed / calls;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Pair Compare(const std::function<void()>& reference, const std::function<void()>& starling,
             double budget_seconds) {
  // Warm up both (first-touch of buffers, connection setup), then size the batches
  // from one timed call of the reference so each batch lasts about 1/10 of the budget.
  reference();
  starling();
  double one = TimeBatch(reference, 1);
  int calls = static_cast<int>(std::clamp(budget_seconds / 10 / std::max(one, 1e-7), 1.0, 100000.0));
  MPI_Bcast(&calls, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> ref, st;
  for (int batch = 0; batch < 10; ++batch) {
    // Alternate which side goes first so neither always runs on a warmer machine.
    if (batch % 2 == 0) {
      ref.push_back(TimeBatch(reference, calls));
      st.push_back(TimeBatch(starling, calls));
    } else {
      st.push_back(TimeBatch(starling, calls));
      ref.push_back(TimeBatch(reference, calls));
    }
  }
  return Pair{Median(ref), Median(st)};
}

std::vector<size_t> Sizes(size_t min_bytes, size_t max_bytes) {
  std::vector<size_t> sizes;
  for (size_t b = 4; b <= max_bytes; b *= 4)
    if (b >= min_bytes) sizes.push_back(b);
  return sizes;
}

std::string HumanBytes(size_t bytes) {
  char text[32];
  if (bytes >= (1u << 20)) std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
  else std::snprintf(text, sizeof text, "%zu B", bytes);
  return text;
}

namespace {

// Progress state (rank 0): the operation being measured and the sizes done so far.
struct ProgressState {
  std::string op;
  size_t first_bytes = 0, last_bytes = 0;
};
ProgressState progress;

// A terminal gets one line rewritten in place; a log (a pipe or file, as under mpirun
// or CI) gets one finished line per operation instead of one endless line of '\r's.
bool Interactive() {
  static const bool tty = isatty(fileno(stderr)) == 1;
  return tty;
}

void PrintFinished() {
  if (progress.op.empty()) return;
  std::string sizes = HumanBytes(progress.first_bytes);
  if (progress.last_bytes != progress.first_bytes) sizes += " .. " + HumanBytes(progress.last_bytes);
  std::fprintf(stderr, "%-28s %s done\n", progress.op.c_str(), sizes.c_str());
  std::fflush(stderr);
}

}  // namespace

void Progress(const std::string& op, size_t bytes) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  if (op != progress.op) {
    if (!Interactive()) PrintFinished();
    progress.op = op;
    progress.first_bytes = bytes;
  }
  progress.last_bytes = bytes;
  if (Interactive()) {
    std::fprintf(stderr, "\r%-28s %10s done   ", op.c_str(), HumanBytes(bytes).c_str());
    std::fflush(stderr);
  }
}

void ProgressEnd() {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0 || progress.op.empty()) return;
  if (Interactive()) std::fprintf(stderr, "\n");
  else PrintFinished();
  progress = ProgressState();
}

void Report(const std::vector<Row>& rows, const std::string& csv_path, const std::string& reference_name) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  std::printf("\n%-20s %-14s %5s %9s %14s %14s %8s %11s\n", "operation", "variant", "ranks", "size",
              (reference_name + " us").c_str(), "starling us", "ratio", "diff us");
  for (const Row& r : rows) {
    const double ref = r.pair.reference_seconds * 1e6, st = r.pair.starling_seconds * 1e6;
    std::printf("%-20s %-14s %5d %9s %14.2f %14.2f %8.3f %11.2f\n", r.op.c_str(), r.variant.c_str(), r.ranks,
                HumanBytes(r.bytes).c_str(), ref, st, st / ref, st - ref);
  }
  std::fflush(stdout);
  if (csv_path.empty()) return;
  FILE* csv = std::fopen(csv_path.c_str(), "a");
  if (!csv) {
    std::fprintf(stderr, "cannot open %s for writing\n", csv_path.c_str());
    return;
  }
  std::fseek(csv, 0, SEEK_END);
  if (std::ftell(csv) == 0) std::fprintf(csv, "operation,variant,ranks,bytes,reference_us,starling_us,ratio\n");
  for (const Row& r : rows) {
    std::fprintf(csv, "%s,%s,%d,%zu,%.3f,%.3f,%.4f\n", r.op.c_str(), r.variant.c_str(), r.ranks, r.bytes,
                 r.pair.reference_seconds * 1e6, r.pair.starling_seconds * 1e6,
                 r.pair.starling_seconds / r.pair.reference_seconds);
  }
  std::fclose(csv);
}

}  // namespace bench
