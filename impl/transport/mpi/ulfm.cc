#include "impl/transport/mpi/ulfm.h"

#include <mpi.h>
#if STARLING_HAVE_ULFM
#include <mpi-ext.h>
#endif

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "impl/common/config.h"
#include "impl/common/error.h"

namespace starling::transport {
namespace {

#if STARLING_HAVE_ULFM
// The MPI_T control variable `mpi_ft_enable` (set by --with-ft ulfm). Open MPI stores
// it as a one-byte bool: read into zeroed storage and test for any set byte.
bool ReadFtEnableVariable() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
  bool enabled = false;
  int count = 0;
  MPI_T_cvar_get_num(&count);
  for (int i = 0; i < count; ++i) {
    char name[256] = {};
    char desc[16] = {};
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
        MPI_SUCCESS)
      continue;
    if (std::strcmp(name, "mpi_ft_enable") != 0) continue;
    MPI_T_cvar_handle handle;
    int elements = 0;
    if (MPI_T_cvar_handle_alloc(i, nullptr, &handle, &elements) != MPI_SUCCESS) break;
    unsigned char value[16] = {};
    if (MPI_T_cvar_read(handle, value) == MPI_SUCCESS)
      for (unsigned char byte : value) enabled = enabled || byte != 0;
    MPI_T_cvar_handle_free(&handle);
    break;
  }
  MPI_T_finalize();
  return enabled;
}
#endif

}  // namespace

bool UlfmCompiled() {
#if STARLING_HAVE_ULFM
  return true;
#else
  return false;
#endif
}

bool UlfmEnabled() {
#if STARLING_HAVE_ULFM
  static std::once_flag once;
  static bool enabled = false;
  std::call_once(once, [] {
    const char* env = std::getenv("OMPI_MCA_mpi_ft_enable");
    enabled = (env != nullptr && (std::strcmp(env, "1") == 0 || std::strcmp(env, "true") == 0)) ||
              ReadFtEnableVariable();
  });
  return enabled;
#else
  return false;
#endif
}

std::string UlfmMissing() {
  if (!UlfmCompiled())
    return "fault tolerance needs Open MPI 5 with ULFM: this Starling was built against an MPI without it "
           "(Open MPI 4.1 has none); build against Open MPI 5 (docs/concepts/fault-tolerance.md) and run under "
           "`mpirun --with-ft ulfm` or `starlingrun --fault-tolerant`";
  if (!UlfmEnabled())
    return "fault tolerance needs ULFM enabled for the job: run under `mpirun --with-ft ulfm` or "
           "`starlingrun --fault-tolerant`";
  return {};
}

void ConfigureUlfmDetector() {
#if STARLING_HAVE_ULFM
  const char* enabled = std::getenv("OMPI_MCA_mpi_ft_enable");
  if (enabled == nullptr || (std::strcmp(enabled, "1") != 0 && std::strcmp(enabled, "true") != 0)) return;
  const double timeout = ParseConfig([](const char* name) { return std::getenv(name); }).ft_detector_seconds;
  if (timeout <= 0) return;
  // Each rank observes the one before it in MPI_COMM_WORLD, heartbeats come every
  // timeout / 5 seconds from a thread of their own; ULFM broadcasts a suspicion.
  // Settings the user made (OMPI_MCA_...) win.
  const std::string values[][2] = {{"mpi_ft_detector", "true"},
                                   {"mpi_ft_detector_thread", "true"},
                                   {"mpi_ft_detector_timeout", Str(timeout)},
                                   {"mpi_ft_detector_period", Str(timeout / 5)}};
  for (const auto& [name, value] : values) setenv(("OMPI_MCA_" + name).c_str(), value.c_str(), /*overwrite=*/0);
#endif
}

void IgnoreBrokenPipes() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

bool IsFailureClass(int error_class) {
#if STARLING_HAVE_ULFM
  return error_class == MPIX_ERR_PROC_FAILED || error_class == MPIX_ERR_PROC_FAILED_PENDING ||
         error_class == MPIX_ERR_REVOKED;
#else
  (void)error_class;
  return false;
#endif
}

void RevokeCommunicator(void* comm) {
#if STARLING_HAVE_ULFM
  MPIX_Comm_revoke(*static_cast<MPI_Comm*>(comm));
#else
  (void)comm;
#endif
}

int AgreeOnCommunicator(void* comm, int* flag) {
#if STARLING_HAVE_ULFM
  MPI_Comm c = *static_cast<MPI_Comm*>(comm);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return MPIX_Comm_agree(c, flag);
#else
  (void)comm;
  (void)flag;
  return MPI_ERR_OTHER;
#endif
}

bool IsPendingFailureClass(int error_class) {
#if STARLING_HAVE_ULFM
  return error_class == MPIX_ERR_PROC_FAILED_PENDING;
#else
  (void)error_class;
  return false;
#endif
}

}  // namespace starling::transport
