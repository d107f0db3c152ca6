// Which pairs of ranks on one host can share memory: probed once per context with a
// real segment. Each rank creates a small segment holding a mailbox, publishes a
// greeting in it, and every same-host peer maps it, checks the greeting and releases
// it (the handshake); two exchanges of small records (allgathers, supplied by the
// caller) tell every rank the outcome of every pair, with the reason for each failure.
// Nothing here waits unboundedly on a peer (the greeting is published before the
// first exchange) and nothing fails: a pair that cannot share memory is reported off.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "impl/transport/shm/segment.h"

namespace starling::transport::shm {

struct ProbeInput {
  int rank = 0;
  int size = 1;
  std::vector<uint64_t> host_keys;    // by rank; 0: unknown (never paired)
  std::vector<std::string> host_names;  // by rank, for the summary
  uint64_t job = 0;       // the same on every rank (names the segments)
  bool enabled = true;    // this rank's STARLING_SHM
  // Collective: every rank's `bytes` bytes, by rank, into `all` (size * bytes).
  std::function<void(const void* mine, size_t bytes, void* all)> allgather;
  SegmentOptions segment;  // tests: another directory or free-space figure
};

struct PairState {
  bool same_host = false;
  bool on = false;
  std::string reason;  // why off ("" when on or on another host)
};

struct ProbeResult {
  bool probed = false;          // false: unknown (e.g. after a repair)
  std::vector<PairState> pairs;  // by peer rank (this rank's own entry: same_host, off)
  std::string summary;          // "on (ranks 0-3 on host vm)", "off (STARLING_SHM=0)", ...
  std::vector<int> host_ranks;  // this rank's host group, ascending (this rank included)
};

// Collective over every rank of `input` (they all call it, with the same host keys,
// job and allgather). The exchanges run only when two ranks share a host somewhere.
ProbeResult ProbeHostPeers(const ProbeInput& input);

// A rank's reader index in `owner`'s mailbox or outbox: its place among the other ranks
// of their host group (ascending), so every rank of the group computes the same.
uint32_t ReaderIndex(const std::vector<int>& group, int owner, int reader);

// "0-3", "0,2,5-7".
std::string FormatRanks(const std::vector<int>& ranks);

}  // namespace starling::transport::shm
