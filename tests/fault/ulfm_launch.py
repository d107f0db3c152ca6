"""How the fault-tolerance drivers start a job: `mpirun` with these arguments.

ULFM on (`--with-ft ulfm`), and no shared-memory BTL: Open MPI's is not crash-safe (a rank
killed while appending to a peer's FIFO leaves that peer spinning inside MPI forever, which
hung 1 in ~150 window tests). `starlingrun --fault-tolerant` passes the same, and
docs/concepts/fault-tolerance.md tells users to.
"""

ULFM_MPIRUN_ARGS = ["--with-ft", "ulfm", "--mca", "btl", "^sm,smcuda,usnic"]
