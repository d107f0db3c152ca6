"""How the fault-tolerance drivers start a job: `mpirun` with these arguments.

ULFM on (`--with-ft ulfm`), and no shared-memory BTL: Open MPI's is not crash-safe (a rank
killed while appending to a peer's FIFO leaves that peer spinning inside MPI forever, which
hung 1 in ~150 window tests). Nor the TCP BTL's put, whose RDMA pipeline (messages over
64 KiB) leaves a request on a dead rank's endpoint that crashes a survivor's next send in
mca_pml_ob1_recv_request_schedule_once (7 of 120 4-rank allreduce jobs; 0 of 120 without).
`starlingrun --fault-tolerant` passes the same, and docs/concepts/fault-tolerance.md tells
users to.
"""

ULFM_MPIRUN_ARGS = ["--with-ft", "ulfm", "--mca", "btl", "^sm,smcuda,usnic",
                    "--mca", "btl_tcp_flags", "send,inplace,need-ack,need-csum"]
