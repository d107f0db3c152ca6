#include "nccl_comm.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <algorithm>
#include <random>

#include "common.h"
#include "impl/device/plugin_abi.h"

namespace starling::emu {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kFrameMagic = 0x53454e43;  // "SENC"
constexpr char kIdMagic[] = "starling-emu-nccl-1";
constexpr size_t kTokenOffset = 32;  // the id: magic, then at kTokenOffset a text token
static_assert(kTokenOffset + 64 <= STARLING_NCCL_ID_BYTES, "the id must fit ncclUniqueId");

// Now plus STARLING_EMU_NCCL_TIMEOUT: the bound of every wait for a peer.
Clock::time_point TimeoutFromNow() {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(GetSettings().nccl_timeout_s));
}

double SecondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// The abstract-namespace address of a rank: nothing on the file system to clean up, and
// the kernel frees the name when the listening socket closes (also when the process dies).
socklen_t Address(const std::string& token, int rank, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  const std::string name = "starling-emu-nccl-" + token + "-" + std::to_string(rank);
  std::memcpy(addr->sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Reads exactly n bytes; a deadline bounds the wait (none for the readers, which are
// woken by shutdown()). Returns "" or what went wrong.
std::string ReadFull(int fd, void* buffer, size_t n, const Clock::time_point* deadline,
                     const std::atomic<bool>* stop = nullptr) {
  char* p = static_cast<char*>(buffer);
  while (n > 0) {
    if (deadline != nullptr) {
      if (stop != nullptr && stop->load()) return "aborted";
      const double left = std::min(SecondsLeft(*deadline), 0.05);  // slices: an abort is seen
      pollfd pfd{fd, POLLIN, 0};
      const int ready = left > 0 ? ::poll(&pfd, 1, static_cast<int>(std::ceil(left * 1000))) : 0;
      if ((ready < 0 && errno == EINTR) || (ready == 0 && SecondsLeft(*deadline) > 0)) continue;
      if (ready <= 0) return "timed out";
    }
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got == 0) return "connection closed";
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return "";
}

// Writes exactly n bytes (SO_SNDTIMEO bounds a peer that stopped reading).
std::string WriteFull(int fd, const void* buffer, size_t n) {
  const char* p = static_cast<const char*>(buffer);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? "timed out (the peer stopped reading)" : std::strerror(errno);
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
  return "";
}

Frame Hello(int nranks, int rank) {
  Frame f;
  f.magic = kFrameMagic;
  f.kind = kHello;
  f.root = rank;
  f.count = static_cast<uint64_t>(nranks);
  return f;
}

// The peer's hello, checked against what this rank expects. "" when it fits.
std::string CheckHello(const Frame& f, int nranks, int my_rank) {
  if (f.magic != kFrameMagic || f.kind != kHello) return "a connection that is not an emulated NCCL peer";
  if (f.count != static_cast<uint64_t>(nranks))
    return Format("rank %d passed nranks = %llu, rank %d nranks = %d", f.root, static_cast<unsigned long long>(f.count),
                  my_rank, nranks);
  if (f.root < 0 || f.root >= nranks || f.root == my_rank) return Format("a peer claims rank %d", f.root);
  return "";
}

}  // namespace

void Comm::NewId(void* id) {
  char* out = static_cast<char*>(id);
  std::memset(out, 0, STARLING_NCCL_ID_BYTES);
  std::memcpy(out, kIdMagic, sizeof kIdMagic);
  std::random_device random;
  const std::string token = Format("%08x%08x%08x%08x-%d", random(), random(), random(), random(), int(::getpid()));
  std::memcpy(out + kTokenOffset, token.data(), token.size());
}

Comm::Comm(int nranks, int rank, int device) : nranks_(nranks), rank_(rank), device_(device) {
  for (int r = 0; r < nranks; ++r) peers_.push_back(std::make_unique<Peer>());
}

Comm::~Comm() {
  if (!closed_) Close(true);
  // Closed only now, when no task can be writing to them any more (an fd number closed
  // earlier could be reused by the process while a writer still held it).
  for (auto& peer : peers_)
    if (peer->fd >= 0) ::close(peer->fd);
}

int Comm::Create(int nranks, const void* id, int rank, int device, std::shared_ptr<Comm>* out) {
  const char* idc = static_cast<const char*>(id);
  if (std::memcmp(idc, kIdMagic, sizeof kIdMagic) != 0)
    return Fail("nccl_comm_init: the id was not made by the emulated nccl_unique_id");
  std::string token(idc + kTokenOffset, strnlen(idc + kTokenOffset, STARLING_NCCL_ID_BYTES - kTokenOffset));
  std::shared_ptr<Comm> comm(new Comm(nranks, rank, device));
  // Non-blocking, like ncclCommInitRankConfig with blocking = 0: the bootstrap runs on a
  // thread of its own, and Status says when it is done. Only an abort (or the emulator's
  // own timeout) ends a bootstrap whose peers never come.
  comm->init_thread_ = std::thread([c = comm.get(), token] { c->Bootstrap(token); });
  *out = std::move(comm);
  return 0;
}

void Comm::Bootstrap(const std::string& token) {
  std::string error;
  if (GetSettings().nccl_stall_rank >= 0 && LauncherRank() == std::to_string(GetSettings().nccl_stall_rank)) {
    while (!stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a rank that never joins
    error = "nccl_comm_init: aborted while initializing (STARLING_EMU_NCCL_STALL_RANK)";
  } else if (nranks_ > 1 && Connect(token, TimeoutFromNow()) != 0) {
    error = LastError();
  }
  if (error.empty()) {
    for (int r = 0; r < nranks_ && nranks_ > 1; ++r) {
      if (r == rank_) continue;
      // Bounded writes: a peer that stops reading is an error, not a hang.
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(GetSettings().nccl_timeout_s);
      tv.tv_usec = static_cast<suseconds_t>((GetSettings().nccl_timeout_s - tv.tv_sec) * 1e6);
      ::setsockopt(peers_[r]->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      peers_[r]->reader = std::thread([this, r] { Read(r); });
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error.empty() && failed_.empty()) failed_ = error;
    initialized_ = true;
  }
  cv_.notify_all();
}

int Comm::Status(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_) return 1;
  if (!failed_.empty()) {
    *why = failed_;
    return 2;
  }
  if (!async_error_.empty()) {
    *why = async_error_;
    return 2;
  }
  return 0;
}

std::string Comm::Hang(std::unique_lock<std::mutex>& lock, const std::string& why, Clock::time_point deadline) {
  for (;;) {
    if (closing_) return "the communicator was aborted (while waiting for a peer that is gone: " + why + ")";
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !closing_)
      return Format("timed out after %g s: %s (a real NCCL would hang here until ncclCommAbort)",
                    GetSettings().nccl_timeout_s, why.c_str());
  }
}

void Comm::PeerLost(const std::string& why) {
  if (GetSettings().nccl_peer_loss_error && async_error_.empty()) async_error_ = "remote process exited or there was "
                                                                             "a network error: " + why;
}

// Every rank listens on its own address; rank r connects to every lower rank and accepts
// every higher one. A connect needs only the peer's listen(), not its accept(), so the
// order cannot deadlock. Each side sends a hello and checks the other's.
int Comm::Connect(const std::string& token, Clock::time_point deadline) {
  const double timeout = GetSettings().nccl_timeout_s;
  const char* fn = "nccl_comm_init";
  sockaddr_un addr;
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return Fail("%s: socket: %s", fn, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } close_listener{listener};
  socklen_t len = Address(token, rank_, &addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return Fail("%s: rank %d: cannot listen (%s): is this id already in use by rank %d?", fn, rank_, std::strerror(errno),
                rank_);
  if (::listen(listener, nranks_) != 0) return Fail("%s: listen: %s", fn, std::strerror(errno));

  const Frame hello = Hello(nranks_, rank_);
  for (int s = 0; s < rank_; ++s) {
    len = Address(token, s, &addr);
    int fd = -1;
    for (;;) {
      if (stop_.load()) return Fail("%s: aborted while initializing", fn);
      fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return Fail("%s: socket: %s", fn, std::strerror(errno));
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) break;
      const int err = errno;
      ::close(fd);
      if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT && err != EINTR)
        return Fail("%s: rank %d: connecting to rank %d: %s", fn, rank_, s, std::strerror(err));
      if (SecondsLeft(deadline) <= 0)
        return Fail("%s: rank %d of %d: timed out after %g s waiting for rank %d to listen (do all ranks call "
                    "nccl_comm_init with the same id?)",
                    fn, rank_, nranks_, timeout, s);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // rank s has not bound yet
    }
    peers_[s]->fd = fd;  // closed by the destructor from now on
    Frame reply;
    std::string error = WriteFull(fd, &hello, sizeof hello);
    if (error.empty()) error = ReadFull(fd, &reply, sizeof reply, &deadline, &stop_);
    if (error.empty()) error = CheckHello(reply, nranks_, rank_);
    if (error.empty() && reply.root != s) error = Format("rank %d's address answered as rank %d", s, reply.root);
    if (!error.empty()) return Fail("%s: rank %d, handshake with rank %d: %s", fn, rank_, s, error.c_str());
  }
  for (int accepted = 0; accepted < nranks_ - 1 - rank_; ++accepted) {
    if (stop_.load()) return Fail("%s: aborted while initializing", fn);
    pollfd pfd{listener, POLLIN, 0};
    const double left = std::min(SecondsLeft(deadline), 0.05);  // slices: an abort is seen
    const int ready = left > 0 ? ::poll(&pfd, 1, static_cast<int>(std::ceil(left * 1000))) : 0;
    if ((ready < 0 && errno == EINTR) || (ready == 0 && SecondsLeft(deadline) > 0)) {
      --accepted;
      continue;
    }
    if (ready <= 0)
      return Fail("%s: rank %d of %d: timed out after %g s: %d higher rank(s) never connected", fn, rank_, nranks_,
                  timeout, nranks_ - 1 - rank_ - accepted);
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return Fail("%s: accept: %s", fn, std::strerror(errno));
    Frame theirs;
    std::string error = ReadFull(fd, &theirs, sizeof theirs, &deadline, &stop_);
    if (error.empty()) error = WriteFull(fd, &hello, sizeof hello);  // before checking, so both sides can tell
    if (error.empty()) error = CheckHello(theirs, nranks_, rank_);
    if (error.empty() && (theirs.root < rank_ || peers_[theirs.root]->fd >= 0))
      error = Format("unexpected connection from rank %d", theirs.root);
    if (!error.empty()) {
      ::close(fd);
      return Fail("%s: rank %d, handshake: %s", fn, rank_, error.c_str());
    }
    peers_[theirs.root]->fd = fd;
  }
  return 0;
}

void Comm::Read(int peer) {
  Peer& p = *peers_[peer];
  std::string why;
  for (;;) {
    Message m;
    why = ReadFull(p.fd, &m.frame, sizeof m.frame, nullptr);
    if (!why.empty()) break;
    if (m.frame.magic != kFrameMagic) {
      why = "a corrupt frame";
      break;
    }
    m.data.resize(m.frame.payload);
    why = ReadFull(p.fd, m.data.data(), m.data.size(), nullptr);
    if (!why.empty()) break;
    Deliver(peer, std::move(m));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.closed = p.said_bye ? Format("rank %d destroyed its communicator", peer)
                          : Format("the connection to rank %d ended (%s): did it exit or abort?", peer, why.c_str());
  }
  cv_.notify_all();
}

void Comm::Deliver(int peer, Message message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& p = *peers_[peer];
    switch (message.frame.kind) {
      case kP2P: p.p2p.push_back(std::move(message)); break;
      case kColl: p.coll.push_back(std::move(message)); break;
      case kAck: ++p.acked; break;
      case kBye: p.said_bye = true; break;
      default: break;
    }
  }
  cv_.notify_all();
}

std::string Comm::Send(int peer, Frame frame, const void* payload) {
  frame.magic = kFrameMagic;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.empty()) return failed_;
    if (closing_) return "the communicator was destroyed or aborted";
  }
  if (peer == rank_) {
    Message m;
    m.frame = frame;
    const char* p = static_cast<const char*>(payload);
    m.data.assign(p, p + frame.payload);
    Deliver(peer, std::move(m));
    return "";
  }
  Peer& p = *peers_[peer];
  std::lock_guard<std::mutex> lock(p.send_mu);
  std::string error = WriteFull(p.fd, &frame, sizeof frame);
  if (error.empty() && frame.payload > 0) error = WriteFull(p.fd, payload, frame.payload);
  if (error.empty()) return "";
  std::unique_lock<std::mutex> state(mu_);  // say why the peer went, if its reader knows
  const std::string why =
      Format("sending to rank %d failed: %s%s%s", peer, error.c_str(), p.closed.empty() ? "" : "; ", p.closed.c_str());
  if (p.said_bye) return why;
  PeerLost(why);  // a peer gone mid-operation: NCCL's kernels wait, they do not fail
  return Hang(state, why, TimeoutFromNow());
}

std::string Comm::Blocked(int peer) {
  if (!failed_.empty()) return failed_;
  if (closing_) return "the communicator was destroyed or aborted";
  return "";
}

std::string Comm::Take(int peer, Channel channel, Message* out) {
  const auto deadline = TimeoutFromNow();
  std::unique_lock<std::mutex> lock(mu_);
  Peer& p = *peers_[peer];
  auto& queue = channel == Channel::kP2P ? p.p2p : p.coll;
  for (;;) {
    if (std::string why = Blocked(peer); !why.empty()) return why;
    if (!queue.empty()) {  // what arrived before a peer left is still delivered
      *out = std::move(queue.front());
      queue.pop_front();
      return "";
    }
    if (!p.closed.empty()) {
      if (p.said_bye) return p.closed;
      PeerLost(p.closed);  // NCCL is not told: its kernels wait for the peer forever
      return Hang(lock, p.closed, deadline);
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && queue.empty())
      return Format("timed out after %g s waiting for rank %d (a real NCCL would hang here: a send or receive "
                    "outside a group, or ranks calling different operations?)",
                    GetSettings().nccl_timeout_s, peer);
  }
}

uint64_t Comm::CountSend(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  return ++peers_[peer]->sent;
}

std::string Comm::WaitAcks(int peer, uint64_t n) {
  const auto deadline = TimeoutFromNow();
  std::unique_lock<std::mutex> lock(mu_);
  Peer& p = *peers_[peer];
  for (;;) {
    if (p.acked >= n) return "";
    if (std::string why = Blocked(peer); !why.empty()) return why;
    if (!p.closed.empty()) {
      if (p.said_bye) return p.closed;
      PeerLost(p.closed);
      return Hang(lock, p.closed, deadline);
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && p.acked < n)
      return Format("timed out after %g s waiting for rank %d to receive what this rank sent (a real NCCL would "
                    "hang here: is its nccl_recv missing, or outside the group?)",
                    GetSettings().nccl_timeout_s, peer);
  }
}

void Comm::MarkFailed(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.empty()) failed_ = "the communicator failed earlier: " + why;
  }
  cv_.notify_all();
}

std::string Comm::Failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return closing_ && failed_.empty() ? "the communicator was destroyed or aborted" : failed_;
}

void Comm::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  ++in_flight_;
}

void Comm::End() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
  }
  cv_.notify_all();
}

void Comm::Close(bool abort) {
  stop_.store(true);
  if (init_thread_.joinable()) init_thread_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    // ncclCommDestroy flushes what was issued; abort does not. Queued operations end
    // anyway: on success, a peer's error, or their own timeout.
    if (!abort) cv_.wait(lock, [&] { return in_flight_ == 0; });
    closing_ = true;
  }
  cv_.notify_all();
  for (int r = 0; r < nranks_; ++r) {
    Peer& p = *peers_[r];
    if (p.fd < 0) continue;
    if (!abort) {  // lets the peer tell a clean destroy from a crash
      Frame bye;
      bye.magic = kFrameMagic;
      bye.kind = kBye;
      std::lock_guard<std::mutex> lock(p.send_mu);
      ::send(p.fd, &bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ::shutdown(p.fd, SHUT_RDWR);  // wakes our reader and any writer; close() waits for ~Comm
  }
  for (auto& peer : peers_)
    if (peer->reader.joinable()) peer->reader.join();
}

}  // namespace starling::emu
