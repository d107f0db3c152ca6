#include "impl/transport/mpi/spawn.h"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <fstream>
#include <iterator>

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

}  // namespace

MPI_Comm SpawnMerged(MPI_Comm comm, int root, const std::string& command, const std::vector<std::string>& argv,
                     int count) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // Only the root spawns (over MPI_COMM_SELF) and waits for the newcomers to start; the
  // others sleep until it says how that went. Then the root's port joins every current
  // rank and every newcomer (MPI_Comm_accept / MPI_Comm_connect, as a collective spawn
  // does inside).
  int outcome = MPI_SUCCESS;
  char port[MPI_MAX_PORT_NAME] = {};
  if (rank == root) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    MPI_Info info = MPI_INFO_NULL;
    // The newcomers start where the root runs (a relative script path still resolves).
    char cwd[PATH_MAX] = {};
    MPI_Info_create(&info);
    if (getcwd(cwd, sizeof(cwd)) != nullptr) MPI_Info_set(info, "wdir", cwd);
    std::vector<int> errors(static_cast<size_t>(count), MPI_SUCCESS);
    MPI_Comm link = MPI_COMM_NULL;  // the root and the newcomers
    outcome = MPI_Comm_spawn(command.c_str(), args.data(), count, info, 0, MPI_COMM_SELF, &link, errors.data());
    MPI_Info_free(&info);
    if (outcome == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(link, MPI_ERRORS_RETURN);
      outcome = MPI_Open_port(MPI_INFO_NULL, port);
      for (int i = 0; i < count && outcome == MPI_SUCCESS; ++i)
        outcome = MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, i, kGrowTag, link);
      MPI_Comm_free(&link);
    }
  }
  int shared = outcome;
  MPI_Request request = MPI_REQUEST_NULL;
  Check(MPI_Ibcast(&shared, 1, MPI_INT, root, comm, &request), "MPI_Ibcast");
  SleepUntilDone(&request, "MPI_Ibcast");
  if (shared != MPI_SUCCESS) {
    if (rank == root && port[0] != '\0') MPI_Close_port(port);
    Check(shared, rank == root ? "MPI_Comm_spawn" : "MPI_Comm_spawn (on rank 0)");
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
