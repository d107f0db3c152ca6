// starlingrun's argument parsing and mpirun command building (no processes started).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "impl/launcher/command.h"
#include "impl/launcher/session_dir.h"

namespace starling::launcher {
namespace {

using Args = std::vector<std::string>;

Options Parse(const Args& args) {
  ParseResult r = ParseArgs(args);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.options;
}

std::string ParseError(const Args& args) {
  ParseResult r = ParseArgs(args);
  EXPECT_FALSE(r.ok()) << "accepted";
  return r.error;
}

// A plain user on a 2-core machine called "node0" with an empty environment.
Environment TwoCores() {
  Environment env;
  env.online_cores = 2;
  env.hostname = "node0.cluster";
  return env;
}

std::vector<std::string> Argv(const Args& args, const Environment& env = TwoCores()) {
  return BuildCommand(Parse(args), env).argv;
}

bool Has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

// True when `seq` appears as consecutive words of argv.
bool HasSeq(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

// Values of every "-x VALUE" pair.
std::vector<std::string> Exports(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size() && argv[i] != "--"; ++i) {
    if (argv[i] == "-x") out.push_back(argv[i + 1]);
  }
  return out;
}

size_t Count(const std::vector<std::string>& v, const std::string& word) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), word));
}

// ---- ParseArgs ---------------------------------------------------------------

TEST(LauncherParse, NumProcSpellings) {
  EXPECT_EQ(Parse({"-np", "4", "prog"}).num_proc, 4);
  EXPECT_EQ(Parse({"-n", "3", "prog"}).num_proc, 3);
  EXPECT_EQ(Parse({"--num-proc", "2", "prog"}).num_proc, 2);
  EXPECT_EQ(Parse({"--num-proc=5", "prog"}).num_proc, 5);
}

TEST(LauncherParse, ProgramAndItsArgumentsAreKeptVerbatim) {
  Options o = Parse({"-np", "2", "python3", "train.py", "-np", "7", "--verbose"});
  EXPECT_EQ(o.program, (Args{"python3", "train.py", "-np", "7", "--verbose"}));
  EXPECT_FALSE(o.verbose);
  o = Parse({"-np", "2", "--", "-weird-name", "x"});
  EXPECT_EQ(o.program, (Args{"-weird-name", "x"}));
}

TEST(LauncherParse, AllOptions) {
  Options o = Parse({"-np", "4", "-H", "a:2,b:2", "--timeout", "1.5", "--verbose", "--mpi-args",
                     "--mca  btl ^openib ", "-x", "A=1", "-x", "B", "--", "prog"});
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[0].name, "a");
  EXPECT_EQ(o.hosts[1].slots, 2);
  EXPECT_TRUE(o.hosts_given);
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 1.5);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.mpi_args, (Args{"--mca", "btl", "^openib"}));
  EXPECT_EQ(o.exports, (Args{"A=1", "B"}));
  EXPECT_EQ(o.program, (Args{"prog"}));

  o = Parse({"-np", "1", "--hostfile", "hosts.txt", "--timeout=0", "prog"});
  EXPECT_EQ(o.hostfile, "hosts.txt");
  EXPECT_EQ(o.timeout_seconds, 0);
}

TEST(LauncherParse, HelpVersionAndPrintConfigNeedNothingElse) {
  EXPECT_TRUE(Parse({"--help"}).help);
  EXPECT_TRUE(Parse({"-h"}).help);
  EXPECT_TRUE(Parse({"--help", "-np", "0"}).help);  // help stops parsing
  EXPECT_TRUE(Parse({"--version"}).version);
  EXPECT_TRUE(Parse({"--print-config"}).print_config);
}

TEST(LauncherParse, BadUsageNamesTheProblem) {
  EXPECT_NE(ParseError({"prog"}).find("missing -np"), std::string::npos);
  EXPECT_NE(ParseError({}).find("missing -np"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "0", "prog"}).find("'0'"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "four", "prog"}).find("'four'"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "-2", "prog"}).find("'-2'"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "2x", "prog"}).find("'2x'"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "99999999999", "prog"}).find("-np"), std::string::npos);
  EXPECT_NE(ParseError({"-np"}).find("-np needs a value"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "2", "--frobnicate", "prog"}).find("unknown option '--frobnicate'"),
            std::string::npos);
  EXPECT_NE(ParseError({"-np", "2"}).find("no program"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "2", "--"}).find("no program"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "2", "-H", "a:1", "--hostfile", "f", "prog"})
                .find("-H and --hostfile cannot be used together"),
            std::string::npos);
  for (const char* bad : {"-1", "abc", "", "1e3", "0x10", "1.2.3", "inf", "nan"}) {
    EXPECT_NE(ParseError({"--timeout", bad, "-np", "1", "prog"}).find("--timeout"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ParseError({"-np", "1", "--verbose=yes", "prog"}).find("takes no value"),
            std::string::npos);
  EXPECT_NE(ParseError({"-np", "1", "-x", "1BAD", "prog"}).find("'1BAD'"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "1", "-x", "=v", "prog"}).find("-x"), std::string::npos);
  EXPECT_NE(ParseError({"-np", "1", "--hostfile", "", "prog"}).find("--hostfile"),
            std::string::npos);
}

TEST(LauncherParse, BadHostLists) {
  for (const char* bad :
       {"a", "a:", ":2", "a:0", "a:-1", "a:x", "a:2,", ",a:2", "a:2,,b:1", "", "a b:2", "a:2:3"}) {
    std::string error = ParseError({"-np", "2", "-H", bad, "prog"});
    EXPECT_NE(error.find("-H"), std::string::npos) << bad << ": " << error;
  }
  EXPECT_NE(
      ParseError({"-np", "2", "-H", "h1:0", "prog"}).find("SLOTS must be a whole number >= 1"),
      std::string::npos);
  EXPECT_NE(ParseError({"-np", "2", "-H", "h1", "prog"}).find("'h1'"), std::string::npos);
}

// ---- Hostfiles ---------------------------------------------------------------

TEST(LauncherHostfile, ParsesSlotsCommentsAndBlankLines) {
  std::vector<Host> hosts;
  ASSERT_EQ(ParseHostfile("# cluster\n\nnode1 slots=4\n  node2 slots=2 max_slots=8  # two\n"
                          "node3\nuser@node4 count=3\n",
                          &hosts),
            "");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].slots, 0);  // not given
  EXPECT_EQ(hosts[3].name, "user@node4");
  EXPECT_EQ(hosts[3].slots, 3);
}

TEST(LauncherHostfile, Errors) {
  std::vector<Host> hosts;
  EXPECT_NE(ParseHostfile("# nothing\n\n", &hosts).find("no hosts"), std::string::npos);
  EXPECT_NE(ParseHostfile("a slots=2\nb slots=0\n", &hosts).find("line 2"), std::string::npos);
  EXPECT_NE(ParseHostfile("b slots=x\n", &hosts).find("slots=x"), std::string::npos);
  EXPECT_TRUE(hosts.empty());  // nothing added on error

  std::string error = ReadHostfile("/nonexistent/hosts.txt", &hosts);
  EXPECT_NE(error.find("/nonexistent/hosts.txt"), std::string::npos);
  EXPECT_NE(error.find("No such file"), std::string::npos);
  EXPECT_NE(ReadHostfile("/", &hosts).find("not a regular file"), std::string::npos);
}

TEST(LauncherHostfile, ReadsAFile) {
  char path[] = "/tmp/starling_hostfile_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "localhost slots=3\n";
  std::vector<Host> hosts;
  EXPECT_EQ(ReadHostfile(path, &hosts), "");
  std::remove(path);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].slots, 3);
}

// ---- BuildCommand ------------------------------------------------------------

TEST(LauncherCommand, DefaultIsLocalhostWithProgramLast) {
  auto argv = Argv({"-np", "2", "prog", "a", "b"});
  EXPECT_EQ(argv[0], "mpirun");
  EXPECT_TRUE(HasSeq(argv, {"-np", "2"}));
  EXPECT_TRUE(HasSeq(argv, {"-H", "localhost:2"}));
  EXPECT_TRUE(HasSeq(argv, {"--bind-to", "none"}));
  EXPECT_TRUE(HasSeq(argv, {"--mca", "orte_base_help_aggregate", "0"}));
  EXPECT_TRUE(HasSeq(argv, {"--mca", "odls_base_sigkill_timeout", "0"}));
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 4, argv.end()), (Args{"--", "prog", "a", "b"}));
}

TEST(LauncherCommand, MpirunFromEnvironment) {
  Environment env = TwoCores();
  env.vars["STARLING_MPIRUN"] = "/opt/ompi/bin/mpirun";
  auto argv = Argv({"-np", "1", "prog"}, env);
  EXPECT_EQ(argv[0], "/opt/ompi/bin/mpirun");
  EXPECT_FALSE(Has(Exports(argv), "STARLING_MPIRUN"));  // the launcher's own setting
}

TEST(LauncherCommand, OversubscribeOnlyWhenRanksExceedSlots) {
  EXPECT_FALSE(Has(Argv({"-np", "2", "prog"}), "--oversubscribe"));  // 2 cores
  EXPECT_TRUE(Has(Argv({"-np", "3", "prog"}), "--oversubscribe"));
  EXPECT_FALSE(Has(Argv({"-np", "6", "-H", "a:2,b:4", "prog"}), "--oversubscribe"));
  EXPECT_TRUE(Has(Argv({"-np", "7", "-H", "a:2,b:4", "prog"}), "--oversubscribe"));
  // -H slots count, not this machine's cores.
  EXPECT_FALSE(Has(Argv({"-np", "8", "-H", "localhost:8", "prog"}), "--oversubscribe"));
  EXPECT_TRUE(Has(Argv({"-np", "2", "-H", "localhost:1", "prog"}), "--oversubscribe"));
}

TEST(LauncherCommand, OversubscribeWithHostfile) {
  Options o = Parse({"-np", "5", "--hostfile", "h.txt", "prog"});
  ASSERT_EQ(ParseHostfile("a slots=2\nb slots=2\n", &o.hosts), "");
  auto argv = BuildCommand(o, TwoCores()).argv;
  EXPECT_TRUE(HasSeq(argv, {"--hostfile", "h.txt"}));
  EXPECT_FALSE(Has(argv, "-H"));
  EXPECT_TRUE(Has(argv, "--oversubscribe"));
  o.num_proc = 4;
  EXPECT_FALSE(Has(BuildCommand(o, TwoCores()).argv, "--oversubscribe"));

  // A local line without slots= counts as the cores; a remote one as 1.
  Options local = Parse({"-np", "2", "--hostfile", "h.txt", "prog"});
  ASSERT_EQ(ParseHostfile("localhost\n", &local.hosts), "");
  EXPECT_FALSE(Has(BuildCommand(local, TwoCores()).argv, "--oversubscribe"));
  local.num_proc = 3;
  EXPECT_TRUE(Has(BuildCommand(local, TwoCores()).argv, "--oversubscribe"));
  Options remote = Parse({"-np", "2", "--hostfile", "h.txt", "prog"});
  ASSERT_EQ(ParseHostfile("far\n", &remote.hosts), "");
  EXPECT_TRUE(Has(BuildCommand(remote, TwoCores()).argv, "--oversubscribe"));
}

TEST(LauncherCommand, RootFlagOnlyForRoot) {
  Environment env = TwoCores();
  EXPECT_FALSE(Has(Argv({"-np", "1", "prog"}, env), "--allow-run-as-root"));
  env.is_root = true;
  EXPECT_TRUE(Has(Argv({"-np", "1", "prog"}, env), "--allow-run-as-root"));
}

TEST(LauncherCommand, LoopbackOnlyWhenEveryHostIsLocal) {
  const std::vector<std::string> btl = {"--mca", "btl_tcp_if_include", "lo"};
  const std::vector<std::string> oob = {"--mca", "oob_tcp_if_include", "lo"};
  for (const char* hosts :
       {"", "localhost:2", "127.0.0.1:1,localhost:1", "node0:2", "node0.cluster:2", "NODE0:2"}) {
    Args args = {"-np", "2", "prog"};
    if (*hosts) args.insert(args.begin(), {"-H", hosts});
    auto argv = Argv(args);
    EXPECT_TRUE(HasSeq(argv, btl)) << hosts;
    EXPECT_TRUE(HasSeq(argv, oob)) << hosts;
  }
  for (const char* hosts : {"node1:2", "localhost:1,node1:1", "10.0.0.2:2"}) {
    auto argv = Argv({"-np", "2", "-H", hosts, "prog"});
    EXPECT_FALSE(Has(argv, "btl_tcp_if_include")) << hosts;
    EXPECT_FALSE(Has(argv, "oob_tcp_if_include")) << hosts;
  }
  Options o = Parse({"-np", "2", "--hostfile", "h", "prog"});
  ASSERT_EQ(ParseHostfile("node1 slots=2\n", &o.hosts), "");
  EXPECT_FALSE(Has(BuildCommand(o, TwoCores()).argv, "btl_tcp_if_include"));
}

TEST(LauncherCommand, InterfaceChoosesTheNetworkOnOneMachineOrMany) {
  for (const char* hosts : {"node1:2,node2:2", "localhost:2", ""}) {
    Args args = {"-np", "4", "--interface", "eth0", "prog"};
    if (*hosts) args.insert(args.begin(), {"-H", hosts});
    Command cmd = BuildCommand(Parse(args), TwoCores());
    EXPECT_TRUE(HasSeq(cmd.argv, {"--mca", "btl_tcp_if_include", "eth0"})) << hosts;
    EXPECT_TRUE(HasSeq(cmd.argv, {"--mca", "oob_tcp_if_include", "eth0"})) << hosts;
    EXPECT_FALSE(Has(cmd.argv, "lo")) << hosts;
    EXPECT_TRUE(cmd.warnings.empty()) << hosts;
  }
  EXPECT_EQ(Parse({"--interface", "10.0.0.0/16,ib0", "-np", "1", "prog"}).interface,
            "10.0.0.0/16,ib0");
  for (const char* bad : {"", ",", "eth0,", ",eth0", "eth0,,ib0", "eth 0", "eth0;rm"}) {
    EXPECT_NE(ParseError({"--interface", bad, "-np", "1", "prog"}).find("--interface"),
              std::string::npos)
        << bad;
  }
  // The user's own MCA choice still wins, and the launcher says --interface was not used.
  Environment env = TwoCores();
  env.vars["OMPI_MCA_btl_tcp_if_exclude"] = "docker0";
  Command cmd =
      BuildCommand(Parse({"-np", "2", "-H", "a:1,b:1", "--interface", "eth0", "prog"}), env);
  EXPECT_FALSE(Has(cmd.argv, "btl_tcp_if_include"));
  EXPECT_TRUE(HasSeq(cmd.argv, {"--mca", "oob_tcp_if_include", "eth0"}));
  ASSERT_EQ(cmd.warnings.size(), 1u);
  EXPECT_NE(cmd.warnings[0].find("btl_tcp_if_exclude"), std::string::npos);
}

TEST(LauncherCommand, RanksDefaultToTheHostsSlots) {
  Options o = Parse({"-H", "node1:2,node2:3", "prog"});
  EXPECT_EQ(o.num_proc, 0);
  EXPECT_EQ(DefaultNumProc(&o), "");
  EXPECT_EQ(o.num_proc, 5);
  EXPECT_TRUE(HasSeq(BuildCommand(o, TwoCores()).argv, {"-np", "5"}));

  Options given = Parse({"-np", "3", "-H", "node1:2,node2:3", "prog"});
  EXPECT_EQ(DefaultNumProc(&given), "");
  EXPECT_EQ(given.num_proc, 3);

  Options file = Parse({"--hostfile", "h", "prog"});
  ASSERT_EQ(ParseHostfile("node1 slots=4\nnode2 slots=4\n", &file.hosts), "");
  EXPECT_EQ(DefaultNumProc(&file), "");
  EXPECT_EQ(file.num_proc, 8);

  Options unknown = Parse({"--hostfile", "h", "prog"});
  ASSERT_EQ(ParseHostfile("node1 slots=4\nnode2\n", &unknown.hosts), "");
  EXPECT_NE(DefaultNumProc(&unknown).find("'node2' has no slots="), std::string::npos);

  Options none;
  EXPECT_NE(DefaultNumProc(&none).find("missing -np"), std::string::npos);
}

TEST(LauncherCommand, UserMcaChoicesWin) {
  // mpirun rejects an MCA parameter given twice, and the user's choice is meant.
  auto argv =
      Argv({"-np", "2", "--mpi-args", "--mca btl_tcp_if_include eth0 --bind-to core", "prog"});
  EXPECT_EQ(Count(argv, "btl_tcp_if_include"), 1u);
  EXPECT_TRUE(
      HasSeq(argv, {"--mca", "btl_tcp_if_include", "eth0", "--bind-to", "core", "--", "prog"}));
  EXPECT_TRUE(HasSeq(argv, {"--mca", "oob_tcp_if_include", "lo"}));
  EXPECT_FALSE(HasSeq(argv, {"--bind-to", "none"}));
  // A SIGTERM handler that needs time: the user's kill timeout, given once.
  argv = Argv({"-np", "2", "--mpi-args", "--mca odls_base_sigkill_timeout 1", "prog"});
  EXPECT_EQ(Count(argv, "odls_base_sigkill_timeout"), 1u);
  EXPECT_TRUE(HasSeq(argv, {"--mca", "odls_base_sigkill_timeout", "1", "--", "prog"}));

  Environment env = TwoCores();
  env.vars["OMPI_MCA_orte_base_help_aggregate"] = "1";
  env.vars["OMPI_MCA_odls_base_sigkill_timeout"] = "2";
  env.vars["OMPI_MCA_oob_tcp_if_exclude"] = "docker0";  // include + exclude is an error
  argv = Argv({"-np", "2", "prog"}, env);
  EXPECT_FALSE(Has(argv, "orte_base_help_aggregate"));
  EXPECT_FALSE(Has(argv, "odls_base_sigkill_timeout"));
  EXPECT_FALSE(Has(argv, "oob_tcp_if_include"));
  EXPECT_TRUE(HasSeq(argv, {"--mca", "btl_tcp_if_include", "lo"}));
}

TEST(LauncherCommand, ExportsStarlingAndBluefogVariablesOnly) {
  Environment env = TwoCores();
  env.vars = {{"STARLING_FOO", "1"}, {"BLUEFOG_TIMELINE", "/tmp/t"},
              {"HOME", "/root"},     {"OMPI_MCA_x", "y"},
              {"PATH", "/bin"},      {"LD_LIBRARY_PATH", "/l"},
              {"PYTHONPATH", "/p"},  {"MY_STARLING_X", "no"},
              {"STARLINGX", "no"}};
  auto exports = Exports(Argv({"-np", "2", "prog"}, env));
  for (const char* name :
       {"STARLING_FOO", "BLUEFOG_TIMELINE", "PATH", "LD_LIBRARY_PATH", "PYTHONPATH"}) {
    EXPECT_TRUE(Has(exports, name)) << name;
  }
  for (const char* name : {"HOME", "OMPI_MCA_x", "MY_STARLING_X", "STARLINGX"}) {
    EXPECT_FALSE(Has(exports, name)) << name;
  }
}

TEST(LauncherCommand, PathsAreExportedOnlyWhenSet) {
  auto exports = Exports(Argv({"-np", "1", "prog"}));
  EXPECT_FALSE(Has(exports, "PATH"));
  EXPECT_FALSE(Has(exports, "PYTHONPATH"));
  EXPECT_FALSE(Has(exports, "LD_LIBRARY_PATH"));
}

TEST(LauncherCommand, ExtraExports) {
  Environment env = TwoCores();
  env.vars = {{"OMP_NUM_THREADS", "4"}, {"STARLING_FOO", "env"}};
  Command cmd =
      BuildCommand(Parse({"-np", "1", "-x", "A=1", "-x", "OMP_NUM_THREADS", "-x", "UNSET_VAR", "-x",
                          "STARLING_FOO=cli", "-x", "B=x=y z", "prog"}),
                   env);
  auto exports = Exports(cmd.argv);
  EXPECT_TRUE(Has(exports, "A=1"));
  EXPECT_TRUE(Has(exports, "OMP_NUM_THREADS"));
  EXPECT_TRUE(Has(exports, "B=x=y z"));
  EXPECT_TRUE(Has(exports, "STARLING_FOO=cli"));
  EXPECT_FALSE(Has(exports, "STARLING_FOO"));  // the -x value replaces the inherited one
  EXPECT_FALSE(Has(exports, "UNSET_VAR"));     // mpirun would only warn; so do we
  ASSERT_EQ(cmd.warnings.size(), 1u);
  EXPECT_NE(cmd.warnings[0].find("UNSET_VAR"), std::string::npos);
}

TEST(LauncherCommand, DefaultLogLevelIsWarn) {
  EXPECT_TRUE(Has(Exports(Argv({"-np", "1", "prog"})), "STARLING_LOG_LEVEL=warn"));

  Environment env = TwoCores();
  env.vars["STARLING_LOG_LEVEL"] = "debug";
  auto exports = Exports(Argv({"-np", "1", "prog"}, env));
  EXPECT_TRUE(Has(exports, "STARLING_LOG_LEVEL"));
  EXPECT_FALSE(Has(exports, "STARLING_LOG_LEVEL=warn"));

  env = TwoCores();
  env.vars["BLUEFOG_LOG_LEVEL"] = "info";  // the BlueFog alias counts as a choice
  exports = Exports(Argv({"-np", "1", "prog"}, env));
  EXPECT_TRUE(Has(exports, "BLUEFOG_LOG_LEVEL"));
  EXPECT_FALSE(Has(exports, "STARLING_LOG_LEVEL=warn"));

  exports = Exports(Argv({"-np", "1", "-x", "STARLING_LOG_LEVEL=trace", "prog"}));
  EXPECT_TRUE(Has(exports, "STARLING_LOG_LEVEL=trace"));
  EXPECT_FALSE(Has(exports, "STARLING_LOG_LEVEL=warn"));
}

TEST(LauncherCommand, RankEnvironmentOverrides) {
  auto overrides =
      RankEnvironmentOverrides(Parse({"-np", "1", "-x", "A=1", "-x", "B", "prog"}), TwoCores());
  EXPECT_EQ(overrides.at("A"), "1");
  EXPECT_EQ(overrides.at("STARLING_LOG_LEVEL"), "warn");
  EXPECT_EQ(overrides.count("B"), 0u);
}

TEST(LauncherCommand, MpiArgsGoBeforeTheProgram) {
  auto argv = Argv({"-np", "1", "--mpi-args", "--report-bindings", "--mpi-args", "-v", "prog"});
  EXPECT_TRUE(HasSeq(argv, {"--report-bindings", "-v", "--", "prog"}));
}

TEST(LauncherFormat, QuotesForTheShell) {
  EXPECT_EQ(FormatCommandLine({"mpirun", "-np", "2", "sh", "-c", "echo $X", "it's", ""}),
            "mpirun -np 2 sh -c 'echo $X' 'it'\\''s' ''");
}

TEST(LauncherVersion, ParsesOpenMpiMajor) {
  EXPECT_EQ(ParseOpenMpiMajor("mpirun (Open MPI) 4.1.4\n\nReport bugs to ..."), 4);
  EXPECT_EQ(ParseOpenMpiMajor("mpirun (Open MPI) 5.0.11\n"), 5);
  EXPECT_EQ(ParseOpenMpiMajor("HYDRA build details:\n    Version: 4.1"), 0);  // MPICH
  EXPECT_EQ(ParseOpenMpiMajor(""), 0);
  EXPECT_EQ(ParseOpenMpiMajor("mpirun (Open MPI) x"), 0);
}

TEST(LauncherCommand, OpenMpi5Flags) {
  Environment env = TwoCores();
  env.mpi_major = 5;
  // PRRTE: oversubscription through the mapping policy; no ORTE-only parameters.
  EXPECT_TRUE(HasSeq(Argv({"-np", "3", "prog"}, env), {"--map-by", ":OVERSUBSCRIBE"}));
  EXPECT_FALSE(Has(Argv({"-np", "3", "prog"}, env), "--oversubscribe"));
  EXPECT_FALSE(Has(Argv({"-np", "3", "prog"}, env), "orte_base_help_aggregate"));
  EXPECT_FALSE(Has(Argv({"-np", "3", "prog"}, env), "odls_base_sigkill_timeout"));
  EXPECT_FALSE(Has(Argv({"-np", "3", "prog"}, env), "oob_tcp_if_include"));  // PRRTE refuses lo alone
  EXPECT_TRUE(HasSeq(Argv({"-np", "3", "prog"}, env), {"--mca", "btl_tcp_if_include", "lo"}));
  EXPECT_TRUE(Has(Argv({"-np", "3", "prog"}), "orte_base_help_aggregate"));  // 4.1 (unknown: as 4)
}

// On one machine, Open MPI 5 gets no host list (with one, its launcher lost the
// processes a grow started in a third of the jobs), and may always oversubscribe (it
// counts cores, where -H localhost:N counted N slots); inside a batch allocation, or
// with hosts given, the list stays.
TEST(LauncherCommand, OpenMpi5OnOneMachineGetsNoHostList) {
  Environment env = TwoCores();
  env.mpi_major = 5;
  for (const char* n : {"1", "2", "3"}) {
    auto argv = Argv({"--fault-tolerant", "-np", n, "prog"}, env);
    EXPECT_FALSE(Has(argv, "-H")) << n;
    EXPECT_TRUE(HasSeq(argv, {"--map-by", ":OVERSUBSCRIBE"})) << n;
    EXPECT_TRUE(HasSeq(argv, {"--mca", "btl_tcp_if_include", "lo"})) << n;  // still this machine alone
    EXPECT_FALSE(Has(Argv({"-np", n, "prog"}, env), "-H")) << n;
  }
  EXPECT_TRUE(HasSeq(Argv({"-np", "2", "-H", "localhost:2", "prog"}, env), {"-H", "localhost:2"}));
  EXPECT_FALSE(Has(Argv({"-np", "2", "-H", "localhost:2", "prog"}, env), "--map-by"));
  for (const char* batch : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"}) {
    Environment allocated = env;
    allocated.vars[batch] = "42";
    EXPECT_TRUE(HasSeq(Argv({"-np", "2", "prog"}, allocated), {"-H", "localhost:2"})) << batch;
    EXPECT_FALSE(Has(Argv({"-np", "2", "prog"}, allocated), "--map-by")) << batch;
  }
  EXPECT_TRUE(HasSeq(Argv({"-np", "2", "prog"}), {"-H", "localhost:2"}));  // Open MPI 4.1: as before
}

TEST(LauncherCommand, FaultTolerantNeedsOpenMpi5) {
  EXPECT_TRUE(Parse({"--fault-tolerant", "-np", "3", "prog"}).fault_tolerant);
  Environment env = TwoCores();
  env.mpi_major = 5;
  Command ok = BuildCommand(Parse({"--fault-tolerant", "-np", "3", "prog"}), env);
  EXPECT_TRUE(ok.error.empty());
  EXPECT_TRUE(HasSeq(ok.argv, {"--with-ft", "ulfm"}));
  // No shared-memory BTL (not crash-safe), unless the user chose the BTLs.
  EXPECT_TRUE(HasSeq(ok.argv, {"--mca", "btl", "^sm,smcuda,usnic"}));
  // Nor the TCP BTL's put (its RDMA pipeline crashes survivors), unless the user set the flags.
  EXPECT_TRUE(HasSeq(ok.argv, {"--mca", "btl_tcp_flags", "send,inplace,need-ack,need-csum"}));
  EXPECT_FALSE(Has(BuildCommand(Parse({"-np", "3", "prog"}), env).argv, "btl_tcp_flags"));
  EXPECT_TRUE(HasSeq(BuildCommand(Parse({"--fault-tolerant", "--mpi-args", "--mca btl_tcp_flags send,put", "-np", "3",
                                          "prog"}),
                                  env)
                         .argv,
                     {"--mca", "btl_tcp_flags", "send,put"}));
  EXPECT_FALSE(Has(BuildCommand(Parse({"--fault-tolerant", "--mpi-args", "--mca btl_tcp_flags send,put", "-np", "3",
                                           "prog"}),
                                   env)
                          .argv,
                      "send,inplace,need-ack,need-csum"));
  EXPECT_FALSE(Has(BuildCommand(Parse({"-np", "3", "prog"}), env).argv, "--with-ft"));
  EXPECT_FALSE(Has(BuildCommand(Parse({"-np", "3", "prog"}), env).argv, "^sm,smcuda,usnic"));
  Command own = BuildCommand(Parse({"--fault-tolerant", "--mpi-args", "--mca btl tcp,self", "-np", "3", "prog"}), env);
  EXPECT_FALSE(Has(own.argv, "^sm,smcuda,usnic"));
  EXPECT_TRUE(HasSeq(own.argv, {"--mca", "btl", "tcp,self"}));
  for (int major : {4, 0}) {
    env.mpi_major = major;
    Command refused = BuildCommand(Parse({"--fault-tolerant", "-np", "3", "prog"}), env);
    EXPECT_NE(refused.error.find("needs Open MPI 5 with ULFM"), std::string::npos) << refused.error;
  }
}

TEST(LauncherCommand, FaultTolerantGrowsPassOnWhatTheRanksGet) {
  Environment env = TwoCores();
  env.mpi_major = 5;
  env.vars["PYTHONPATH"] = "/p";
  env.vars["STARLING_TIMEOUT_SECONDS"] = "30";
  env.vars["HOME"] = "/root";
  // Everything passed with -x, the default log level too; nothing else.
  std::vector<std::string> argv = Argv({"--fault-tolerant", "-x", "FOO=1", "-np", "3", "prog"}, env);
  auto at = std::find_if(argv.begin(), argv.end(),
                         [](const std::string& w) { return w.rfind("STARLING_GROW_ENV=", 0) == 0; });
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at - 1), "-x");
  std::string names = "," + at->substr(std::strlen("STARLING_GROW_ENV=")) + ",";
  for (const char* name : {"PYTHONPATH", "STARLING_TIMEOUT_SECONDS", "FOO", "STARLING_LOG_LEVEL"})
    EXPECT_NE(names.find(std::string(",") + name + ","), std::string::npos) << name << " in " << names;
  EXPECT_EQ(names.find("HOME"), std::string::npos) << names;
  // The user's own list comes first and is kept; their -x STARLING_GROW_ENV=... wins outright.
  env.vars["STARLING_GROW_ENV"] = "MINE";
  argv = Argv({"--fault-tolerant", "-np", "3", "prog"}, env);
  at = std::find_if(argv.begin(), argv.end(), [](const std::string& w) { return w.rfind("STARLING_GROW_ENV=", 0) == 0; });
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(at->rfind("STARLING_GROW_ENV=MINE,", 0), 0u) << *at;
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "STARLING_GROW_ENV"), 0);
  argv = Argv({"--fault-tolerant", "-x", "STARLING_GROW_ENV=A", "-np", "3", "prog"}, env);
  EXPECT_TRUE(HasSeq(argv, {"-x", "STARLING_GROW_ENV=A"}));
  EXPECT_EQ(std::count_if(argv.begin(), argv.end(), [](const std::string& w) { return w.find("STARLING_GROW_ENV") == 0; }), 1);
  // Only fault-tolerant jobs grow.
  EXPECT_FALSE(Has(Argv({"-np", "3", "prog"}, env), "STARLING_GROW_ENV=MINE,PYTHONPATH"));
  for (const std::string& w : Argv({"-np", "3", "prog"}, env)) EXPECT_NE(w.rfind("STARLING_GROW_ENV=", 0), 0u) << w;
}

TEST(LauncherHelp, MentionsEveryOption) {
  const std::string help = HelpText();
  for (const char* option : {"-np", "-n N", "--num-proc", "-H", "--hosts", "--hostfile",
                             "--timeout", "--print-config", "--verbose", "--mpi-args", "-x NAME",
                             "--fault-tolerant", "--help", "--version", "STARLING_LOG_LEVEL=warn", "Examples",
                             "--interface", "plm_rsh_agent", "starlingrun start -np N", "starlingrun stop",
                             "--profile NAME", "--start-timeout", "STARLING_PYTHON"}) {
    EXPECT_NE(help.find(option), std::string::npos) << option;
  }
}

// A killed Open MPI 5 mpirun's session directory: found where Open MPI looks, removed
// with everything below it, and a link of that name is left alone with its target.
TEST(SessionDir, StaleDirectoryOfThePidIsRemoved) {
  namespace fs = std::filesystem;
  char pattern[] = "/tmp/starling-session-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path tmp = pattern;
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  setenv("TMPDIR", tmp.c_str(), 1);
  EXPECT_EQ(SessionDirFor(4242), (tmp / "ompi.4242").string());

  fs::create_directories(tmp / "ompi.4242" / "1" / "0");
  std::ofstream(tmp / "ompi.4242" / "pmix.host.tool.4242") << "stale";
  std::ofstream(tmp / "ompi.4242" / "1" / "0" / "file") << "stale";
  EXPECT_TRUE(RemoveStaleSessionDir(SessionDirFor(4242)));
  EXPECT_FALSE(fs::exists(tmp / "ompi.4242"));
  EXPECT_TRUE(RemoveStaleSessionDir(SessionDirFor(4242)));  // nothing there: fine

  fs::create_directories(tmp / "kept");
  std::ofstream(tmp / "kept" / "file") << "keep";
  fs::create_directory_symlink(tmp / "kept", tmp / "ompi.4343");
  EXPECT_TRUE(RemoveStaleSessionDir(SessionDirFor(4343)));
  EXPECT_TRUE(fs::exists(tmp / "kept" / "file"));

  if (saved) {
    setenv("TMPDIR", saved_value.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace starling::launcher
