// starlingrun's pure part: command-line parsing and the mpirun command it builds.
// Nothing here forks, execs or reads the process environment (apart from
// ReadHostfile and CurrentEnvironment), so every decision can be unit-tested.
#ifndef STARLING_IMPL_LAUNCHER_COMMAND_H_
#define STARLING_IMPL_LAUNCHER_COMMAND_H_

#include <map>
#include <string>
#include <vector>

namespace starling::launcher {

// Exit statuses of the launcher itself (the rest is mpirun's own status).
constexpr int kExitUsage = 2;        // bad command line
constexpr int kExitTimeout = 124;    // --timeout expired, as timeout(1)
constexpr int kExitCannotRun = 127;  // mpirun not found / not executable, as a shell

// One host and its slot count. slots == 0 means "not given" (a hostfile line without
// slots=, which Open MPI reads as "as many as the host has cores").
struct Host {
  std::string name;
  int slots = 0;
};

struct Options {
  int num_proc = 0;            // -np; 0 = not given
  std::vector<Host> hosts;     // from -H, or read from --hostfile by the caller
  bool hosts_given = false;    // -H was on the command line
  std::string hostfile;        // --hostfile FILE ("" = none)
  std::string interface;       // --interface LIST: TCP for MPI and Open MPI's daemons ("" = auto)
  double timeout_seconds = 0;  // 0 = no limit
  bool print_config = false;
  bool verbose = false;
  bool help = false;
  bool version = false;
  bool fault_tolerant = false;  // --fault-tolerant: ULFM (Open MPI 5), survivors go on
  std::vector<std::string> mpi_args;  // --mpi-args, already split on whitespace
  std::vector<std::string> exports;   // -x NAME or NAME=VALUE, in order
  std::vector<std::string> program;   // program and its arguments
};

struct ParseResult {
  Options options;
  std::string error;  // empty on success; otherwise one line naming the problem
  bool ok() const { return error.empty(); }
};

// Parses the arguments after argv[0]. -h/--help and --version stop parsing and
// succeed whatever else is on the line; --print-config needs neither -np nor a
// program. Does not read the hostfile (see ReadHostfile).
ParseResult ParseArgs(const std::vector<std::string>& args);

// "h1:2,h2:4" -> hosts. Returns "" or an error naming the bad entry.
std::string ParseHostList(const std::string& text, std::vector<Host>* hosts);

// Open MPI hostfile text ("host [slots=N] [max_slots=M]" per line, '#' comments).
std::string ParseHostfile(const std::string& text, std::vector<Host>* hosts);

// Reads and parses a hostfile; the error names the file when it cannot be read.
std::string ReadHostfile(const std::string& path, std::vector<Host>* hosts);

// Without -np, the ranks are the sum of the hosts' slots (as mpirun does). Sets
// options->num_proc, or returns an error when there are no hosts or one has no slot
// count (a hostfile line without slots=). Call after ReadHostfile.
std::string DefaultNumProc(Options* options);

// What the command depends on outside the command line.
struct Environment {
  std::map<std::string, std::string> vars;  // the launcher's environment
  bool is_root = false;                     // effective uid 0
  int online_cores = 1;                     // sysconf(_SC_NPROCESSORS_ONLN)
  std::string hostname;                     // gethostname()
  int mpi_major = 0;  // Open MPI major version of the mpirun to run (0: unknown, taken as 4)
};

// The major version in `mpirun --version` output ("mpirun (Open MPI) 5.0.11"), or 0.
int ParseOpenMpiMajor(const std::string& version_output);

// The environment of this process.
Environment CurrentEnvironment();

struct Command {
  std::vector<std::string> argv;      // argv[0] is mpirun (or $STARLING_MPIRUN)
  std::vector<std::string> warnings;  // things to tell the user before running
  std::string error;                  // non-empty: refuse to run (a usage error)
};

// True when every host is this machine (so TCP can be pinned to loopback).
bool AllHostsLocal(const std::vector<Host>& hosts, const std::string& hostname);

// The mpirun command for options that ParseArgs accepted (and, with --hostfile,
// whose hosts were filled in by ReadHostfile).
Command BuildCommand(const Options& options, const Environment& env);

// The environment changes the ranks get on top of the launcher's own: the -x
// NAME=VALUE extras and the default STARLING_LOG_LEVEL. --print-config applies them
// to its own process so that it shows what the ranks will see.
std::map<std::string, std::string> RankEnvironmentOverrides(const Options& options,
                                                            const Environment& env);

// argv joined for display, each word quoted for a POSIX shell when needed.
std::string FormatCommandLine(const std::vector<std::string>& argv);

// The --help text.
std::string HelpText();

}  // namespace starling::launcher

#endif  // STARLING_IMPL_LAUNCHER_COMMAND_H_
