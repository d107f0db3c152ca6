#include "impl/transport/mpi/spawn.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "impl/common/error.h"
#include "impl/transport/mpi/mpi_transport.h"
#include "impl/transport/mpi/ulfm.h"

namespace starling::transport {
namespace {

std::atomic<bool> g_joined{false};

// A failed rank is PEER_FAILED (as everywhere else), any other MPI error TRANSPORT.
void Check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(code, &error_class);
  throw Error(IsFailureClass(error_class) ? Code::kPeerFailed : Code::kTransport,
              Str(MpiErrorText(call, code), " (during starling_context_grow)"));
}

// Waits for a nonblocking MPI request without spinning: the ranks that do not spawn
// sleep while the newcomers start (a busy wait on every rank would take the cores the
// newcomers need to start: measured 9 s instead of 1 s for a Python newcomer at 8 ranks
// on 2 cores).
void SleepUntilDone(MPI_Request* request, const char* call) {
  for (;;) {
    int done = 0;
    Check(MPI_Test(request, &done, MPI_STATUS_IGNORE), call);
    if (done) return;
    usleep(1000);
  }
}

constexpr int kGrowTag = 7301;
constexpr int kReadyTag = 7302;
// The root's outcome when the newcomers did not report in time (not an MPI code).
constexpr int kNotJoined = -1;

using Clock = std::chrono::steady_clock;

// The root's part of a grow, on a thread of its own: MPI_Comm_spawn returns only once
// every new process has initialized MPI, and the first message to a new process can
// block inside MPI (its connection data is looked up in PMIx) if it died meanwhile; a
// program that exits or fails before creating its Starling context would block the grow
// forever. So the thread spawns, opens the port, sends it to each newcomer and waits
// for each to answer that it holds it; the root's caller waits for that until the
// deadline. If the thread finishes after the deadline (the grow was abandoned), it
// closes the port or sends an empty one, so late newcomers fail instead of waiting.
// A thread stuck on a dead newcomer stays stuck: its state is never freed.
struct Handover {
  std::mutex mutex;
  bool done = false;
  bool abandoned = false;
  int outcome = MPI_SUCCESS;
  char port[MPI_MAX_PORT_NAME] = {};
};

// An empty port tells the newcomers that the grow was abandoned (sent without waiting).
const char kNoPort[MPI_MAX_PORT_NAME] = {};
void SendNoPort(MPI_Comm link, int count) {
  for (int i = 0; i < count; ++i) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(kNoPort, MPI_MAX_PORT_NAME, MPI_CHAR, i, kGrowTag, link, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

// What the newcomers get beyond their launcher daemon's environment: the variables
// STARLING_GROW_ENV names (comma-separated; starlingrun --fault-tolerant sets it to
// everything it passes with -x), with this process's values, as NAME=VALUE. Without
// them a newcomer lacked what `-x` gave the first ranks: a Python newcomer failed at
// its import for want of -x PYTHONPATH, and the current ranks waited for it until
// STARLING_TIMEOUT_SECONDS.
std::vector<std::string> GrowEnvironment() {
  const char* names = std::getenv("STARLING_GROW_ENV");
  if (names == nullptr || *names == '\0') return {};
  std::vector<std::string> assignments;
  std::stringstream list(names);
  std::string name;
  while (std::getline(list, name, ',')) {
    const char* value = name.empty() || name.find('=') != std::string::npos ? nullptr : std::getenv(name.c_str());
    if (value != nullptr) assignments.push_back(name + "=" + value);
  }
  assignments.push_back(std::string("STARLING_GROW_ENV=") + names);  // the newcomers' own grows pass it on
  return assignments;
}

// Spawns and hands the port over (blocking calls: this runs on the handover thread).
int SpawnAndHandOver(const std::string& command, const std::vector<std::string>& argv, int count, char* port) {
  // The environment goes through env(1): Open MPI's spawn key for it (PMIX_ENVAR) takes
  // at most MPI_MAX_INFO_VAL (256) characters, less than one PATH. env execs the
  // program in the same process, so MPI sees the program itself.
  // (A program whose path has a '=' would read as an assignment: it gets no variables.)
  std::vector<std::string> words;
  if (command.find('=') == std::string::npos) words = GrowEnvironment();
  std::string program = command;
  if (!words.empty()) {
    words.insert(words.begin(), "--");
    words.push_back(command);
    program = "/usr/bin/env";
  }
  words.insert(words.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (const std::string& a : words) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  MPI_Info info = MPI_INFO_NULL;
  // The newcomers start where the root runs (a relative script path still resolves).
  char cwd[PATH_MAX] = {};
  MPI_Info_create(&info);
  if (getcwd(cwd, sizeof(cwd)) != nullptr) MPI_Info_set(info, "wdir", cwd);
  std::vector<int> errors(static_cast<size_t>(count), MPI_SUCCESS);
  MPI_Comm link = MPI_COMM_NULL;  // the root and the newcomers
  int outcome = MPI_Comm_spawn(program.c_str(), args.data(), count, info, 0, MPI_COMM_SELF, &link, errors.data());
  MPI_Info_free(&info);
  if (outcome != MPI_SUCCESS) return outcome;
  MPI_Comm_set_errhandler(link, MPI_ERRORS_RETURN);
  outcome = MPI_Open_port(MPI_INFO_NULL, port);
  if (outcome != MPI_SUCCESS) {
    SendNoPort(link, count);  // the newcomers fail instead of waiting for a port
  } else {
    // Each newcomer answers once it holds the port: one that died before it (a program
    // failing after MPI_Init, e.g. at its mpi4py import) never does, and the current
    // ranks must not enter MPI_Comm_accept for it.
    std::vector<int> answers(static_cast<size_t>(count));
    for (int i = 0; i < count && outcome == MPI_SUCCESS; ++i) {
      outcome = MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, i, kGrowTag, link);
      if (outcome == MPI_SUCCESS) outcome = MPI_Recv(&answers[i], 1, MPI_INT, i, kReadyTag, link, MPI_STATUS_IGNORE);
    }
    if (outcome != MPI_SUCCESS) {
      MPI_Close_port(port);
      port[0] = '\0';
    }
  }
  MPI_Comm_free(&link);
  return outcome;
}

// The root: the handover's outcome (MPI_SUCCESS with the open port in `port`, an MPI
// error, or kNotJoined once the deadline passed).
int SpawnWithin(const std::string& command, const std::vector<std::string>& argv, int count,
                Clock::time_point deadline, char* port) {
  auto handover = std::make_shared<Handover>();
  std::thread([handover, command, argv, count] {
    char opened[MPI_MAX_PORT_NAME] = {};
    const int outcome = SpawnAndHandOver(command, argv, count, opened);
    std::lock_guard<std::mutex> lock(handover->mutex);
    handover->done = true;
    handover->outcome = outcome;
    std::memcpy(handover->port, opened, sizeof opened);
    if (handover->abandoned && outcome == MPI_SUCCESS) MPI_Close_port(opened);  // late newcomers' connect fails
  }).detach();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(handover->mutex);
      if (handover->done) {
        std::memcpy(port, handover->port, MPI_MAX_PORT_NAME);
        return handover->outcome;
      }
      if (Clock::now() >= deadline) {
        handover->abandoned = true;
        return kNotJoined;
      }
    }
    usleep(1000);
  }
}

}  // namespace

MPI_Comm SpawnMerged(MPI_Comm comm, int root, const std::string& command, const std::vector<std::string>& argv,
                     int count, double limit_seconds) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // Only the root spawns (over MPI_COMM_SELF) and waits for the newcomers to start; the
  // others sleep until it says how that went. Then the root's port joins every current
  // rank and every newcomer (MPI_Comm_accept / MPI_Comm_connect, as a collective spawn
  // does inside).
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_seconds));
  int outcome = MPI_SUCCESS;
  char port[MPI_MAX_PORT_NAME] = {};
  if (rank == root) outcome = SpawnWithin(command, argv, count, deadline, port);
  int shared = outcome;
  MPI_Request request = MPI_REQUEST_NULL;
  Check(MPI_Ibcast(&shared, 1, MPI_INT, root, comm, &request), "MPI_Ibcast");
  SleepUntilDone(&request, "MPI_Ibcast");
  if (shared != MPI_SUCCESS) {
    if (rank == root && port[0] != '\0') MPI_Close_port(port);
    // A process of the job died, or rank 0's handover thread may stay blocked inside MPI
    // on it: finalizing could wait forever or pull MPI from under that thread.
    MpiLifetime::NoteFailure();
    STARLING_CHECK(shared != kNotJoined, Code::kTimeout, "starling_context_grow: the new process(es) did not join "
                   "within ", limit_seconds, " s (STARLING_TIMEOUT_SECONDS, else ", kDefaultGrowLimitSeconds,
                   "): does the program start, and create its Starling context (starling_context_create, "
                   "bf.init(), Context()) before anything that can fail? The context is unchanged");
    // A new process that died is not a failure of this context (not PEER_FAILED).
    throw Error(Code::kTransport, Str("starling_context_grow: the new process(es) failed before joining: ",
                                      MpiErrorText(rank == root ? "MPI_Comm_spawn" : "MPI_Comm_spawn (on rank 0)",
                                                   shared),
                                      "; the context is unchanged"));
  }
  MPI_Comm inter = MPI_COMM_NULL;
  const int code = MPI_Comm_accept(port, MPI_INFO_NULL, root, comm, &inter);
  if (rank == root) MPI_Close_port(port);
  Check(code, "MPI_Comm_accept");
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  MPI_Comm merged = MPI_COMM_NULL;
  const int merge = MPI_Intercomm_merge(inter, /*high=*/0, &merged);
  MPI_Comm_free(&inter);
  Check(merge, "MPI_Intercomm_merge");
  MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
  return merged;
}

MPI_Comm JoinMerged() {
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL || g_joined.exchange(true)) return MPI_COMM_NULL;
  MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  char port[MPI_MAX_PORT_NAME] = {};
  Check(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, kGrowTag, parent, MPI_STATUS_IGNORE), "MPI_Recv");
  STARLING_CHECK(port[0] != '\0', Code::kTimeout, "this process was started by starling_context_grow, but the "
                 "running job stopped waiting for it (it took longer than STARLING_TIMEOUT_SECONDS to start)");
  const int ready = 1;
  Check(MPI_Send(&ready, 1, MPI_INT, 0, kReadyTag, parent), "MPI_Send");
  MPI_Comm inter = MPI_COMM_NULL;
  Check(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter), "MPI_Comm_connect");
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  MPI_Comm merged = MPI_COMM_NULL;
  const int merge = MPI_Intercomm_merge(inter, /*high=*/1, &merged);
  MPI_Comm_free(&inter);
  Check(merge, "MPI_Intercomm_merge");
  MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
  return merged;
}

void BroadcastBytes(MPI_Comm comm, int root, std::vector<char>* bytes) {
  int length = static_cast<int>(bytes->size());
  Check(MPI_Bcast(&length, 1, MPI_INT, root, comm), "MPI_Bcast");
  bytes->resize(static_cast<size_t>(length));
  Check(MPI_Bcast(bytes->data(), length, MPI_BYTE, root, comm), "MPI_Bcast");
}

MPI_Comm Reorder(MPI_Comm comm, int key) {
  MPI_Comm ordered = MPI_COMM_NULL;
  Check(MPI_Comm_split(comm, 0, key, &ordered), "MPI_Comm_split");
  MPI_Comm_set_errhandler(ordered, MPI_ERRORS_RETURN);
  return ordered;
}

std::string OwnExecutable() {
  char path[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  STARLING_CHECK(n > 0, Code::kInvalidUsage, "cannot read /proc/self/exe: pass options->command");
  return std::string(path, static_cast<size_t>(n));
}

std::vector<std::string> OwnArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());  // the program itself
  return args;
}

}  // namespace starling::transport
