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

}  // namespace

MPI_Comm SpawnMerged(MPI_Comm comm, int root, const std::string& command, const std::vector<std::string>& argv,
                     int count) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  MPI_Info info = MPI_INFO_NULL;
  if (rank == root) {
    // The newcomers start where the root runs (a relative script path still resolves).
    char cwd[PATH_MAX] = {};
    MPI_Info_create(&info);
    if (getcwd(cwd, sizeof(cwd)) != nullptr) MPI_Info_set(info, "wdir", cwd);
  }
  std::vector<int> errors(static_cast<size_t>(count), MPI_SUCCESS);
  MPI_Comm inter = MPI_COMM_NULL;
  const int code = MPI_Comm_spawn(command.c_str(), args.data(), count, info, root, comm, &inter, errors.data());
  if (info != MPI_INFO_NULL) MPI_Info_free(&info);
  Check(code, "MPI_Comm_spawn");
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
  MPI_Comm merged = MPI_COMM_NULL;
  Check(MPI_Intercomm_merge(parent, /*high=*/1, &merged), "MPI_Intercomm_merge");
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
