// The "capi" target's input: one call of a C entry point with every argument taken
// from these bytes (read as this struct, zero-padded when shorter).
#pragma once

#include <cstdint>

#include "descriptor.h"

namespace starling_fuzz {

enum Entry : uint8_t {
  kAllreduce,
  kLocalAllreduce,
  kBroadcast,
  kAllgather,
  kAllgatherFirstDims,
  kNeighborAllreduce,
  kNeighborAllgather,
  kNeighborAllgatherFirstDims,
  kHierarchicalNeighborAllreduce,
  kPairGossip,
  kCompressedAllreduce,          // compression options from value, small and weights
  kCompressedNeighborAllreduce,
  kTopology,       // topology_create from the edge lists, set_topology, queries
  kContextCreate,  // context options
  kStats,          // starling_get_stats with a fuzzed struct_size
  kReduceScatter,  // counts: the harness's first_dims list (kNullFirstDims: NULL)
  kAlltoall,       // send and recv counts: first_dims and first_dims + 1 (NULL as above)
  kPeerStats,      // starling_get_peer_stats: peer from value, struct_size from args
  kProbePeers,     // starling_probe_peers: repetitions from value, bulk_bytes from small,
                   // count from args.num_sources (kNullOut: no outputs, kNullArgs: no args)
  kNumEntries,
};

constexpr int kMaxList = 8;  // entries of every harness-owned list

// Call flags.
constexpr uint8_t kNonblocking = 1, kInPlace = 2, kNullIn = 4, kNullOut = 8, kNullFirstDims = 16, kNullArgs = 32;
// List flags (neighbor args, topology edges).
constexpr uint8_t kNullSources = 1, kNullSourceWeights = 2, kNullDestinations = 4, kNullDestinationWeights = 8,
                  kNullName = 16;

struct ArgsRecipe {
  uint64_t struct_size;  // taken modulo 256
  int32_t use_weights, dynamic, check_topology;
  int8_t num_sources, num_destinations;  // negative ones are errors; capped at kMaxList
  uint8_t flags;
  uint8_t pad;
  double self_weight;
  int32_t sources[kMaxList];
  double source_weights[kMaxList];
  int32_t destinations[kMaxList];
  double destination_weights[kMaxList];
};

// kTopology takes its edges from args (sources, destinations, source_weights);
// kContextCreate and kStats their struct_size and fields from args too (use_weights:
// use_host_comm, dynamic: nodes_per_machine).
struct CallRecipe {
  uint8_t entry;  // modulo kNumEntries
  uint8_t flags;
  int16_t small;  // topology size
  int32_t value;  // reduce op, root, peer, queried rank, is_weighted or host_comm
  double weights[2];  // pair_gossip
  TensorRecipe in, out;
  ArgsRecipe args;
};

}  // namespace starling_fuzz
