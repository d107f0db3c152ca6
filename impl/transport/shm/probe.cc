#include "impl/transport/shm/probe.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "impl/common/error.h"
#include "impl/transport/shm/mailbox.h"

namespace starling::transport::shm {
namespace {

constexpr uint64_t kGreetingMagic = 0x4F4C4C4548525453ull;  // "STRHELLO"
constexpr size_t kReasonBytes = 240;

enum : int32_t { kDisabled = 0, kCreated = 1, kCreateFailed = 2 };
// A rank's outcome for one peer's segment (second exchange).
enum : uint8_t { kPairOk = 0, kPairSkipped = 1, kPairMapFailed = 2 };

struct Greeting {
  uint64_t magic;
  uint64_t job;
  int32_t rank;
  uint32_t nonce;
};

// First exchange: what each rank created.
struct ProbeCreated {
  int32_t state;
  uint32_t nonce;
  char reason[kReasonBytes];
};

void CopyText(char* out, size_t capacity, const std::string& text) { std::snprintf(out, capacity, "%s", text.c_str()); }
std::string ReadText(const char* text, size_t capacity) { return std::string(text, strnlen(text, capacity)); }

// The segment of `rank` in this probe: its name is fixed by job, rank and nonce.
std::string ProbeName(uint64_t job, int rank, uint32_t nonce) { return SegmentName(job, "probe", rank, nonce); }

std::string WithoutName(std::string text, const std::string& name) {
  for (size_t at; (at = text.find(name)) != std::string::npos;) {
    size_t from = at;
    while (from > 0 && text[from - 1] != ' ') --from;  // the directory before the name
    text.erase(from > 0 ? from - 1 : from, at + name.size() - (from > 0 ? from - 1 : from));
  }
  return text;
}

}  // namespace

std::string FormatRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? Str(ranks[i]) : Str(ranks[i], "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

ProbeResult ProbeHostPeers(const ProbeInput& in) {
  const int n = in.size;
  STARLING_CHECK(n >= 1 && in.rank >= 0 && in.rank < n && in.host_keys.size() == static_cast<size_t>(n),
                 Code::kInternal, "shared-memory probe: inconsistent input");
  // Host groups, identical on every rank (the keys came from one allgather).
  std::map<uint64_t, std::vector<int>> groups;
  for (int r = 0; r < n; ++r)
    if (in.host_keys[r] != 0) groups[in.host_keys[r]].push_back(r);
  size_t widest = 1;
  for (const auto& [key, ranks] : groups) widest = std::max(widest, ranks.size());
  ProbeResult result;
  result.probed = true;
  result.pairs.resize(static_cast<size_t>(n));
  const uint64_t my_key = in.host_keys[in.rank];
  result.host_ranks = my_key != 0 ? groups[my_key] : std::vector<int>{in.rank};
  const std::vector<int>& group = result.host_ranks;
  const std::string host = in.rank < static_cast<int>(in.host_names.size()) ? in.host_names[in.rank] : "?";
  auto index_in = [](const std::vector<int>& ranks, int r) {
    return static_cast<int>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
  };
  for (int r : group) result.pairs[r].same_host = r != in.rank;
  if (widest <= 1) {  // known to every rank alike: no exchange at all
    result.summary = Str("off (no other rank of this context on host ", host, ")");
    return result;
  }
  const std::vector<int> peers = [&] {
    std::vector<int> p;
    for (int r : group)
      if (r != in.rank) p.push_back(r);
    return p;
  }();

  // 1. Create this rank's segment and publish the greeting (before the exchange, so
  // no peer ever waits for it).
  ProbeCreated mine{};
  mine.nonce = NewNonce();
  Segment own;
  Mailbox own_box;
  if (!in.enabled) {
    mine.state = kDisabled;
    CopyText(mine.reason, sizeof mine.reason, Str("STARLING_SHM=0 on rank ", in.rank));
  } else if (!peers.empty()) {
    try {
      const uint32_t readers = static_cast<uint32_t>(peers.size());
      const size_t bytes = Mailbox::RegionBytes(readers, sizeof(Greeting));
      own = Segment::Create(ProbeName(in.job, in.rank, mine.nonce), bytes, readers, in.segment);
      own_box = Mailbox::Format(own.payload(), own.payload_bytes(), readers, sizeof(Greeting));
      void* buffer = own_box.BeginWrite(WaitPolicy{}, nullptr);  // version 1: free at once
      const Greeting greeting{kGreetingMagic, in.job, in.rank, mine.nonce};
      std::memcpy(buffer, &greeting, sizeof greeting);
      own_box.Publish(sizeof greeting);
      mine.state = kCreated;
    } catch (const std::exception& e) {  // Error, or bad_alloc: a reason, never a failed creation
      mine.state = kCreateFailed;
      CopyText(mine.reason, sizeof mine.reason, Str("rank ", in.rank, ": ", e.what()));
    }
  } else {
    mine.state = kCreated;  // alone on its host: nothing to create
  }
  std::vector<ProbeCreated> created(static_cast<size_t>(n));
  in.allgather(&mine, sizeof mine, created.data());

  // 2. Map each peer's segment, check its greeting, release it (the handshake).
  const size_t record_bytes = kReasonBytes + widest;
  std::vector<unsigned char> outcome(record_bytes, 0);
  std::string first_failure;
  std::vector<Segment> mapped;  // kept until the second exchange, then unmapped
  for (int p : peers) {
    const ProbeCreated& theirs = created[p];
    uint8_t code = kPairOk;
    if (!in.enabled || theirs.state != kCreated) {
      code = kPairSkipped;  // the reason is in the first exchange's records
    } else {
      try {
        Segment segment = Segment::Open(ProbeName(in.job, p, theirs.nonce), in.segment);
        const Mailbox box = Mailbox::Attach(segment.payload(), segment.payload_bytes());
        const std::vector<int>& their_group = groups[in.host_keys[p]];
        const uint32_t reader = ReaderIndex(their_group, p, in.rank);
        STARLING_CHECK(box.readers() == their_group.size() - 1, Code::kTransport, "rank ", p, "'s probe mailbox has ",
                       box.readers(), " readers, ", their_group.size() - 1, " expected");
        WaitPolicy policy;
        policy.timeout_seconds = 2.0;  // published before the exchange: visible at once
        size_t bytes = 0;
        const void* data = box.Read(reader, 1, &bytes, policy, nullptr);
        Greeting greeting{};
        STARLING_CHECK(bytes == sizeof greeting, Code::kTransport, "rank ", p, "'s greeting has ", bytes, " bytes");
        std::memcpy(&greeting, data, sizeof greeting);
        STARLING_CHECK(greeting.magic == kGreetingMagic && greeting.job == in.job && greeting.rank == p &&
                           greeting.nonce == theirs.nonce,
                       Code::kTransport, "rank ", p, "'s greeting does not match (another job's segment?)");
        box.Release(reader, 1);
        mapped.push_back(std::move(segment));
      } catch (const std::exception& e) {
        code = kPairMapFailed;
        // The cause, without the segment's name: the summary names the pair.
        if (first_failure.empty()) first_failure = WithoutName(e.what(), ProbeName(in.job, p, theirs.nonce));
      }
    }
    outcome[kReasonBytes + static_cast<size_t>(index_in(group, p))] = code;
  }
  CopyText(reinterpret_cast<char*>(outcome.data()), kReasonBytes, first_failure);
  std::vector<unsigned char> outcomes(record_bytes * static_cast<size_t>(n));
  in.allgather(outcome.data(), record_bytes, outcomes.data());
  own.Unlink();  // every peer has had its chance to map it (the last one unlinked it already)
  mapped.clear();

  // 3. Each pair of this host: on only when both directions worked.
  auto code_of = [&](int from, int to) {  // `from`'s outcome for `to`
    const std::vector<int>& g = groups[in.host_keys[from]];
    return outcomes[record_bytes * static_cast<size_t>(from) + kReasonBytes + static_cast<size_t>(index_in(g, to))];
  };
  auto reason_of = [&](int from) {
    return ReadText(reinterpret_cast<const char*>(&outcomes[record_bytes * static_cast<size_t>(from)]), kReasonBytes);
  };
  auto pair_reason = [&](int a, int b) -> std::string {
    for (int x : {a, b})  // disabled, or its segment could not be created
      if (created[x].state != kCreated) return ReadText(created[x].reason, kReasonBytes);
    for (int x : {a, b})
      if (code_of(x, x == a ? b : a) != kPairOk)
        return Str("rank ", x, " cannot use its peer's segment: ", reason_of(x));
    return {};
  };
  std::vector<std::pair<std::string, std::string>> off;  // (reason, "1<->2, 1<->3"), for the summary
  size_t off_pairs = 0;
  bool all_disabled = true;
  for (size_t i = 0; i < group.size(); ++i) {
    all_disabled = all_disabled && created[group[i]].state == kDisabled;
    for (size_t j = i + 1; j < group.size(); ++j) {
      const int a = group[i], b = group[j];
      std::string why = pair_reason(a, b);
      // The owner's own check: the peer's release is visible in this rank's mailbox.
      if (why.empty() && (a == in.rank || b == in.rank)) {
        const int peer = a == in.rank ? b : a;
        const uint32_t reader = ReaderIndex(group, in.rank, peer);
        if (own.valid() && own_box.consumed(reader) != 1)
          why = Str("rank ", peer, " reported the handshake but rank ", in.rank, " does not see it in shared memory");
      }
      if (a == in.rank || b == in.rank) {
        PairState& state = result.pairs[a == in.rank ? b : a];
        state.on = why.empty();
        state.reason = why;
      }
      if (why.empty()) continue;
      ++off_pairs;
      const std::string pair = Str(a, "<->", b);
      auto same = std::find_if(off.begin(), off.end(), [&](const auto& o) { return o.first == why; });
      if (same == off.end()) off.emplace_back(why, pair);
      else same->second += ", " + pair;
    }
  }
  const std::string where = Str("ranks ", FormatRanks(group), " on host ", host);
  if (group.size() == 1) {
    result.summary = Str("off (no other rank of this context on host ", host, ")");
  } else if (all_disabled) {
    result.summary = "off (STARLING_SHM=0)";
  } else if (off.empty()) {
    result.summary = Str("on (", where, ")");
  } else {
    const size_t pairs = group.size() * (group.size() - 1) / 2;
    std::string list;
    for (size_t i = 0; i < off.size() && i < 4; ++i) list += Str(i ? "; " : "", off[i].second, " (", off[i].first, ")");
    if (off.size() > 4) list += Str("; and ", off.size() - 4, " more reasons");
    result.summary = off_pairs == pairs ? Str("off for every pair of ", where, ": ", list)
                                        : Str("on (", where, ") except off for ", list);
  }
  return result;
}

uint32_t ReaderIndex(const std::vector<int>& group, int owner, int reader) {
  uint32_t index = 0;
  for (int r : group) {
    if (r == reader) return index;
    if (r != owner) ++index;
  }
  return index;
}

}  // namespace starling::transport::shm
