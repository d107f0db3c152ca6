// The text of starlingrun --help.
#include "impl/launcher/command.h"

namespace starling::launcher {

std::string HelpText() {
  return R"(Usage: starlingrun [options] [--] program [args...]
       starlingrun start -np N [options] [--profile NAME]   (notebooks)
       starlingrun stop [--profile NAME]

Starts `program` as N ranks of a Starling (or BlueFog-style) job through Open MPI's
mpirun, with the mpirun flags a single machine or a small cluster needs.

Options:
  -np N, -n N, --num-proc N   number of ranks to start (required, except with -H or a
                              hostfile whose every line has slots=: then the sum of
                              the slots)
  -H, --hosts h1:2,h2:4       hosts and how many ranks (slots) each takes; every entry
                              is HOST:SLOTS with SLOTS >= 1 (default: this machine;
                              localhost:N for Open MPI 4, or inside a batch allocation)
  --hostfile FILE             Open MPI hostfile, one "host slots=N" per line; cannot be
                              combined with -H
  --interface LIST            network interfaces (or CIDR subnets), comma-separated,
                              that MPI and Open MPI's daemons use for TCP, e.g. eth0 or
                              10.0.0.0/16: the network that joins the machines
  --timeout SECONDS           stop every rank after SECONDS (fractions allowed; 0 = no
                              limit, the default); starlingrun then exits with status 124,
                              like timeout(1)
  --print-config              print the STARLING_* configuration table (each variable,
                              the value the ranks would get, its default and meaning)
                              and exit
  --verbose                   print the mpirun command line before running it
  --fault-tolerant            survive dead ranks (Open MPI 5 with ULFM: mpirun --with-ft
                              ulfm): the job goes on, the survivors' Starling calls fail
                              with PEER_FAILED and they may repair the context; the
                              launcher reports each rank that dies and exits 0 when the
                              survivors finish (refused on Open MPI 4); processes a
                              grow starts get what -x passes too (STARLING_GROW_ENV)
  --mpi-args "ARGS"           extra arguments for mpirun, appended as given (split on
                              spaces, no quoting); they win over the automatic flags below
  -x NAME[=VALUE]             also pass environment variable NAME to every rank, with
                              VALUE if given (repeatable)
  -h, --help                  show this help and exit
  --version                   print the Starling version and exit

What starlingrun adds to mpirun for you:
  --allow-run-as-root         when run as root
  --oversubscribe             when N exceeds the slots: the online cores of this machine,
                              or the sum of the slots given by -H or --hostfile
  --bind-to none              each rank has a progress thread beside its main thread
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
                              when every host is this machine (no -H or --hostfile, or
                              only localhost, 127.0.0.1 or this host's name), so Open MPI
                              does not try other network interfaces; with --interface,
                              that list instead, on one machine or several. Across
                              machines without --interface, Open MPI picks (every
                              interface but loopback)
  --mca orte_base_help_aggregate 0
                              full error messages from every rank (Open MPI 4)
  --mca odls_base_sigkill_timeout 0
                              once a rank fails, the others are stopped at once
                              rather than after two 1 s sleeps (Open MPI 4); a
                              rank's SIGTERM handler then gets no time: give it some
                              with --mpi-args "--mca odls_base_sigkill_timeout 1"

Environment:
  Every STARLING_* and BLUEFOG_* variable set here is passed to every rank, and so are
  PATH, LD_LIBRARY_PATH and PYTHONPATH when set. Other variables reach the ranks only
  through -x.
  If neither STARLING_LOG_LEVEL nor BLUEFOG_LOG_LEVEL is set, the ranks get
  STARLING_LOG_LEVEL=warn: the library alone is silent, but under starlingrun it warns
  about stalled operations and other problems. Set STARLING_LOG_LEVEL to change this.
  STARLING_MPIRUN         the mpirun to use (default: mpirun from PATH)

Several machines:
  mpirun starts the ranks of other hosts through ssh: it must log in to each host
  without a password, find the same program (and Starling) at the same path there,
  and the hosts must accept TCP from each other. Another way in than ssh is Open MPI's
  choice: --mpi-args "--mca plm_rsh_agent /path/to/agent" (or OMPI_MCA_plm_rsh_agent);
  Open MPI 5 ignores that one and takes --mpi-args "--prtemca plm_ssh_agent /path/to/agent".

Signals and exit status:
  starlingrun exits with mpirun's exit status (128+S if mpirun dies of signal S), with
  124 after --timeout, with 2 after a usage error, and with 127 if mpirun cannot be
  started. Ctrl-C, SIGTERM and SIGHUP are passed on to mpirun and its ranks; whatever
  is still running 5 s later (or at a second Ctrl-C) is killed, and starlingrun exits
  with 128+signal (130 for Ctrl-C). --timeout sends SIGTERM, then SIGKILL 5 s later.

Notebooks (Jupyter, ipyparallel):
  `starlingrun start -np N [options]` starts N ipyparallel engines as the ranks of one
  job (engine id = rank) with the same options as a batch run, and returns once all
  have registered; a notebook connects with ipyparallel.Client(profile=NAME) and runs
  %%px cells. `starlingrun stop` ends the engines and the controller. --profile NAME
  (default bluefog, as BlueFog's ibfrun) keeps several clusters apart; --start-timeout S
  bounds the start (default 60). Needs ipyparallel in STARLING_PYTHON (default python3),
  the Python that runs starling.interactive (from Python: starling.interactive.start(n=4)).

Examples:
  starlingrun -np 4 python3 train.py --epochs 10
  starlingrun -np 8 -H node1:4,node2:4 ./bench
  starlingrun -np 16 --hostfile hosts.txt --timeout 3600 python3 train.py
  STARLING_TIMELINE=/tmp/tl starlingrun -np 2 -x OMP_NUM_THREADS=1 ./app
  starlingrun -H node1:2,node2:2 --interface eth0 ./app
  starlingrun --print-config
)";
}

}  // namespace starling::launcher
