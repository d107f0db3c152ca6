// Timing helpers for starling_bench: both sides of a comparison are measured in
// alternating batches inside one run, so machine noise hits them alike.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace bench {

struct Pair {
  double reference_seconds;  // median time per call, raw MPI
  double starling_seconds;   // median time per call, Starling
};

// Runs `reference` and `starling` (each one call) in alternating batches until each
// side has spent about `budget_seconds`, and returns the median per-call times. Every
// rank must call it with the same arguments (it synchronizes with MPI_Barrier and
// agrees on batch counts through rank 0).
Pair Compare(const std::function<void()>& reference, const std::function<void()>& starling,
             double budget_seconds);

// Sizes 4 B, 16 B, ... up to max_bytes (powers of 4).
std::vector<size_t> Sizes(size_t min_bytes, size_t max_bytes);
std::string HumanBytes(size_t bytes);

struct Row {
  std::string op;
  std::string variant;
  int ranks;
  size_t bytes;
  Pair pair;
};

// Rank 0 reports progress on stderr: on a terminal one line per operation, rewritten
// as sizes finish; in a log (a pipe or file: mpirun, CI) only the finished line.
// ProgressEnd, called when an operation's sizes are all done, ends its line.
void Progress(const std::string& op, size_t bytes);
void ProgressEnd();

// Prints the table (rank 0) and appends rows to a CSV file if path is non-empty.
void Report(const std::vector<Row>& rows, const std::string& csv_path, const std::string& reference_name);

}  // namespace bench
