/* Starling: decentralized collective communication for distributed training.
 *
 * This is the whole public ABI: plain C99, stable, exchanging tensors as DLPack
 * DLTensor views. Every language binding (Python, Java, Julia) and every C or C++
 * engine goes through these functions.
 *
 * Conventions that hold for every function below:
 * - Every function returns starling_status_t: 0 (STARLING_SUCCESS) on success,
 *   >0 while still pending (request test only), <0 on error. On error,
 *   starling_last_error() returns a message that names what was wrong; it is
 *   thread-local and valid until the next failing call on the same thread.
 * - Nothing here terminates or prints into the host process. Logging is opt-in
 *   (STARLING_LOG_LEVEL).
 * - Handles are typed opaque values. A NULL, freed or destroyed handle gives
 *   STARLING_ERR_INVALID_HANDLE; handles are never reused, so double frees are caught.
 * - Tensors are BORROWED: `const DLTensor*` inputs and `DLTensor*` outputs must stay
 *   valid until the call returns or, for a _nonblocking call, until its request has
 *   completed. Tensors must be in CPU memory, contiguous (row-major, strides NULL or
 *   compact), aligned to their element size, with lanes == 1, and of one of the
 *   dtypes listed at starling_dtype_supported(). Dimensions are >= 0, and the byte
 *   size and the end address (data + byte_offset + size) must stay below 2^63:
 *   anything else is STARLING_ERR_INVALID_ARGUMENT. A call is in place when input and
 *   output are the same memory.
 * - Collective calls (marked "Collective") must be made by every rank of the context,
 *   in the same order. When ranks disagree on a classic collective (different
 *   operation, dtype, element count or root), every rank fails with
 *   STARLING_ERR_MISMATCH naming the ranks and both calls, and the context stays
 *   usable; neighbor operations fail on the ranks that receive mismatching data.
 *   Never silent corruption. A rank that never makes the
 *   call at all is reported by a stall warning and, with STARLING_TIMEOUT_SECONDS, an
 *   error.
 * - Argument checks happen on the calling thread before anything is queued: a call
 *   with bad arguments fails immediately and leaves no request behind.
 * - Thread safety: all functions may be called from any thread. Operations on one
 *   context are executed one at a time in the order they were submitted.
 * - Failures of the job (see "Reliability" below starling_context_abort): every call
 *   that communicates can also return STARLING_ERR_ABORTED (the context was aborted)
 *   and STARLING_ERR_PEER_FAILED (a rank of the context is gone; the message names it),
 *   besides STARLING_ERR_TIMEOUT and STARLING_ERR_TRANSPORT listed per function.
 */
#ifndef STARLING_STARLING_H_
#define STARLING_STARLING_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

/* ---------------------------------------------------------------------------------
 * Versions. STARLING_VERSION(M, m, p) = M * 10000 + m * 100 + p, fixed forever. */
#define STARLING_VERSION_MAJOR 0
#define STARLING_VERSION_MINOR 1
#define STARLING_VERSION_PATCH 0
#define STARLING_VERSION(M, m, p) ((M) * 10000 + (m) * 100 + (p))
#define STARLING_VERSION_CODE \
  STARLING_VERSION(STARLING_VERSION_MAJOR, STARLING_VERSION_MINOR, STARLING_VERSION_PATCH)

#if defined(STARLING_BUILDING_LIBRARY)
#define STARLING_API __attribute__((visibility("default")))
#else
#define STARLING_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Status codes. */
typedef int starling_status_t;

/* The values of starling_status_t. starling_status_string() explains each; the
 * message of starling_last_error() says what exactly went wrong. */
enum starling_status_code {
  STARLING_SUCCESS = 0,                  /* the call did what it says */
  STARLING_IN_PROGRESS = 1,              /* request not finished yet (test only) */
  STARLING_ERR_INVALID_ARGUMENT = -1,    /* a NULL pointer, bad tensor, shape, rank, weight... */
  STARLING_ERR_INVALID_HANDLE = -2,      /* NULL, freed or destroyed handle */
  STARLING_ERR_INVALID_USAGE = -3,       /* right arguments, wrong moment (waited twice...) */
  STARLING_ERR_UNSUPPORTED = -4,         /* dtype, device or feature not supported */
  STARLING_ERR_MISMATCH = -5,            /* ranks disagree on a collective call */
  STARLING_ERR_TIMEOUT = -6,             /* STARLING_TIMEOUT_SECONDS passed waiting for peers */
  STARLING_ERR_SHUTDOWN = -7,            /* the context was destroyed before the op ran */
  STARLING_ERR_TRANSPORT = -8,           /* MPI failed; the context is unusable */
  STARLING_ERR_NOT_FOUND = -9,           /* no such name (windows) */
  STARLING_ERR_ALREADY_EXISTS = -10,     /* name already taken (windows) */
  STARLING_ERR_OUT_OF_MEMORY = -11,     /* an allocation failed (the message says which) */
  STARLING_ERR_INTERNAL = -12,           /* a bug in Starling: please report it */
  STARLING_ERR_ABORTED = -13,            /* starling_context_abort was called on the context */
  STARLING_ERR_PEER_FAILED = -14,        /* a rank of the context is gone (killed or exited) */
  STARLING_ERR_DEVICE = -15              /* the CUDA runtime or NCCL failed (message names the call) */
};

/* The library's version as STARLING_VERSION(M, m, p). Compare with
 * STARLING_VERSION_CODE to detect a header/library mismatch. */
STARLING_API int starling_get_version(void);

/* Static text for a status code, with a hint on what to do. Never NULL. */
STARLING_API const char* starling_status_string(starling_status_t status);

/* Detail of the last failing call on this thread ("" if none). Thread-local; valid
 * until the next failing call on the same thread. */
STARLING_API const char* starling_last_error(void);

/* The table of STARLING_* environment variables: name, value in effect, default and
 * meaning, one per line (read once per process), then a line per live context saying
 * which of its same-host ranks can share memory ("shm: on (ranks 0-3 on host vm)",
 * "shm: off (STARLING_SHM=0)", "shm: on (...) except off for 1<->2 (why)"). The text
 * stays valid for the life of the process. Never NULL. */
STARLING_API const char* starling_config_string(void);

/* ---------------------------------------------------------------------------------
 * Data types. Supported: float16, bfloat16, float32, float64, int8, int16, int32,
 * int64, uint8 (lanes == 1). */

/* *out = 1 if dtype is supported, else 0. */
STARLING_API starling_status_t starling_dtype_supported(DLDataType dtype, int* out);

/* ---------------------------------------------------------------------------------
 * Handles. */
typedef struct starling_context_s* starling_context_t;
typedef struct starling_request_s* starling_request_t;
typedef struct starling_topology_s* starling_topology_t;
typedef struct starling_schedule_s* starling_schedule_t;
typedef struct starling_window_s* starling_window_t;

/* ---------------------------------------------------------------------------------
 * Contexts. A context is a group of ranks with one progress engine.
 *
 * Options follow the struct_size rule: initialize with STARLING_CONTEXT_OPTIONS_INIT
 * and set fields by name; fields added later get their defaults for older callers. */
typedef struct starling_context_options {
  size_t struct_size;   /* sizeof(starling_context_options_t) */
  /* 0: Starling uses MPI_COMM_WORLD, initializing MPI (MPI_THREAD_MULTIPLE) if nobody
   * has, and finalizing it when the last such context is destroyed, if it initialized
   * it. 1: use host_comm; MPI must already be initialized with MPI_THREAD_MULTIPLE and
   * is neither initialized nor finalized by Starling. */
  int use_host_comm;
  /* The host's communicator as a Fortran handle (MPI_Comm_c2f; mpi4py: comm.py2f()). */
  int64_t host_comm;
  /* Ranks per machine. 0: take STARLING_NODES_PER_MACHINE, else detect machines by
   * shared memory. >0: group consecutive ranks into machines of this many ranks (to
   * simulate several machines on one host). */
  int nodes_per_machine;
} starling_context_options_t;

#define STARLING_CONTEXT_OPTIONS_INIT \
  { sizeof(starling_context_options_t), 0, 0, 0 }

/* Creates a context. options may be NULL (defaults). A program started without a
 * launcher is a world of size 1.
 * Collective: every rank of the communicator. PRODUCES *out (destroy it).
 * Errors: INVALID_ARGUMENT (NULL out, bad struct_size or host_comm), UNSUPPORTED (MPI
 * thread level below MPI_THREAD_MULTIPLE), INVALID_USAGE (MPI already finalized),
 * TRANSPORT. */
STARLING_API starling_status_t starling_context_create(const starling_context_options_t* options,
                                                       starling_context_t* out);

/* Destroys a context: operations already submitted run to completion (their requests
 * stay valid and can still be waited on and freed); later submissions fail with
 * STARLING_ERR_SHUTDOWN; the progress thread is joined. Then this rank tells the others
 * that it left after its last operation (a rank still waiting for it in a later
 * operation fails with STARLING_ERR_PEER_FAILED naming it instead of hanging), and
 * waits until every other rank has left too (serving their window requests meanwhile;
 * a rank that fails or abandons its context ends the wait).
 * After starling_context_abort, or once an operation failed with
 * STARLING_ERR_PEER_FAILED, destroy is LOCAL: it never communicates and never waits for
 * peers (queued operations fail at once with the context's error), it frees this
 * process's resources, and it does not finalize MPI even if Starling initialized it
 * (Open MPI's MPI_Finalize waits for every rank): MPI stays initialized until the
 * process exits (window replies still in flight are abandoned, their memory kept).
 * Destroy also waits for a call still running on another thread to return (after an
 * abort that takes milliseconds).
 * Collective (local after an abort or a peer failure). Errors: INVALID_HANDLE. */
STARLING_API starling_status_t starling_context_destroy(starling_context_t ctx);

/* Aborts a context, like NCCL's ncclCommAbort. Callable from any thread at any time,
 * also while other threads are blocked inside Starling calls on this context.
 * - Every operation in flight or queued fails within milliseconds with
 *   STARLING_ERR_ABORTED: blocking calls on other threads return it, requests complete
 *   with it (wait/test return it; free them as usual).
 * - Every later call on the context that communicates fails at once with
 *   STARLING_ERR_ABORTED (nonblocking calls fail at the call: no request is returned),
 *   and so does starling_window_update (its mutex wait could depend on peers).
 *   Layout queries, starling_get_stats and the timeline calls still work.
 *   starling_window_free releases the window's handle locally and returns SUCCESS.
 * - This rank stops answering peers' one-sided window requests.
 * - Abort is local: peers are not told. They see this rank as silent (stall warning,
 *   STARLING_TIMEOUT_SECONDS), or, once this process is gone, STARLING_ERR_PEER_FAILED.
 *   Destroying the aborted context tells them that this rank left: their operations
 *   that wait for it fail with STARLING_ERR_PEER_FAILED, and their destroy does not
 *   wait for it.
 * - Then call starling_context_destroy, which is local (see above).
 * - Memory: input and output tensors of operations that were in flight may be left
 *   partly written. Receives that had not begun are withdrawn; if a large message was
 *   already arriving, the error message of that operation says so, and its output
 *   tensor must stay allocated until the process exits (MPI may still write it).
 * Idempotent: aborting twice is not an error. Local, no communication.
 * Errors: INVALID_HANDLE (NULL, or already destroyed). */
STARLING_API starling_status_t starling_context_abort(starling_context_t ctx);

/* Leaves the job now, without the other ranks, and frees the handle: for exit paths
 * after an error (an uncaught exception, a fatal error in the application). Every other
 * rank is told (a departure notice): its pending and later operations that wait for
 * this rank fail with STARLING_ERR_PEER_FAILED and a message naming this rank and
 * `reason` ("rank 0 (pid 42 on host vm) is exiting: uncaught RuntimeError: ...").
 * Then the context is aborted and torn down locally: no collective, and MPI is not
 * finalized (the process is expected to exit; Open MPI's launcher then ends the job
 * with a non-zero status). reason: what peers are told after "rank N ", e.g. "is
 * exiting: out of memory" (NULL: "abandoned its context"); longer than 480 bytes is cut.
 * Returns within about 0.4 s (0.1 s for the launcher to forward this process's last
 * output, such as a traceback, before the peers' errors; then the notices must leave).
 * Also done by Starling itself when the process exits while a context is alive
 * (exit() or a return from main without destroy): reason "exited (status N) without
 * destroying its context". The Python binding does it for an uncaught exception.
 * Local (not collective). Errors: INVALID_HANDLE. */
STARLING_API starling_status_t starling_context_abandon(starling_context_t ctx, const char* reason);

/* Reliability: what a rank sees when another rank fails.
 * - A rank that leaves: starling_context_destroy (and the bindings' shutdown/close)
 *   tells the other ranks, after operations already submitted ran, that this rank
 *   takes no part in later operations; a rank waiting for it in a later one fails
 *   within milliseconds with STARLING_ERR_PEER_FAILED ("rank 0 (...) destroyed its
 *   context (shutdown, close, or the cleanup at exit) after operation #5, so it takes
 *   no part in this one (#6)"). A rank that abandons its context (starling_context_abandon, an uncaught
 *   Python exception, exit without destroy) ends every peer's waits the same way.
 * - A rank that dies (SIGKILL, crash, or exit without destroying its context): a
 *   pending operation that waits for it fails with STARLING_ERR_PEER_FAILED and a
 *   message such as "rank 2 (pid 1234 on host node1) is gone (killed or exited)",
 *   STARLING_PEER_CHECK_SECONDS (default 0.5 s) after it started waiting, plus at most
 *   the same again; the context is then marked failed and every later call fails at
 *   once with the same status and message. Detection compares the peer's process
 *   identity (pid, start time) through /proc, so it covers ranks on the SAME host
 *   (same boot and pid namespace); while waiting, every same-host rank of the context
 *   is checked, not only the awaited ones, so ranks that wait for a survivor fail too.
 *   Ranks on other hosts are not probed: their death is handled by the launcher
 *   (mpirun/starlingrun end the whole job when a rank is killed) and by
 *   STARLING_TIMEOUT_SECONDS. When MPI itself reports a failure while a same-host peer
 *   is gone, the error is PEER_FAILED naming that peer instead of TRANSPORT.
 * - A rank that stops responding (SIGSTOP, an endless loop in the application): the
 *   stall warning (STARLING_STALL_WARNING_SECONDS, logging at warn) names it and says
 *   whether it is "stopped" (state T, e.g. SIGSTOP or a debugger) or "running" (busy
 *   outside Starling); with STARLING_TIMEOUT_SECONDS the operation fails with
 *   STARLING_ERR_TIMEOUT naming it (and its state). After a TIMEOUT, destroy is still
 *   collective unless starling_context_abort is called first. */

/* Surviving failures (ULFM). On Open MPI 5 with User-Level Failure Mitigation, in a job
 * started with it (`mpirun --with-ft ulfm`, `starlingrun --fault-tolerant`), a rank's
 * death no longer ends the job, and the context can go on without it:
 * - Detection: MPI reports the death (measured: 0.03-0.05 s after a SIGKILL on one
 *   host, docs/reliability.md); Starling then revokes the context's
 *   communicators, so on EVERY surviving rank every pending and later operation of the
 *   context fails with STARLING_ERR_PEER_FAILED and a message naming the dead rank(s)
 *   ("rank 2 (pid 1234 on host vm) is gone ..."), also operations that do not involve
 *   the dead rank: blocking and nonblocking calls (a request waited on later returns
 *   the error), fused batches (every member fails), window operations and waits for
 *   a window mutex (also one the dead rank held). Nothing hangs. A rank that learns of
 *   the failure only through the revocation names the ranks MPI reports as failed.
 * - Recovery: every survivor calls starling_context_repair (a collective over the
 *   survivors), after which the context is usable again with fewer ranks.
 * - Without ULFM (Open MPI 4.1, or a job started without it) the reliability rules
 *   above apply (the launcher ends the job), and starling_context_repair fails with
 *   STARLING_ERR_UNSUPPORTED saying what is needed. */

/* *out = 1 when this context survives the death of a rank (ULFM built in and enabled
 * for this job), else 0. Local. Errors: INVALID_HANDLE, INVALID_ARGUMENT. */
STARLING_API starling_status_t starling_fault_tolerant(starling_context_t ctx, int* out);

/* Options of starling_context_repair (struct_size rule, as the context options). */
typedef struct starling_repair_options {
  size_t struct_size;            /* sizeof(starling_repair_options_t) */
  /* The topology over the survivors (size = survivors), the same on every survivor.
   * NULL: the current topology's generator over the new size when it is one of
   * Starling's generators (exponential-two, exponential and symmetric exponential
   * with bases 2-4, mesh grid 2D with automatic shape, star around 0, the rings, fully
   * connected); otherwise the subgraph the survivors induce (renumbered, edges to and
   * from dead ranks dropped, other weights unchanged). BORROWED. */
  starling_topology_t topology;
  int is_weighted;               /* with topology: as in starling_set_topology */
} starling_repair_options_t;

#define STARLING_REPAIR_OPTIONS_INIT { sizeof(starling_repair_options_t), NULL, 0 }

/* What starling_context_repair did. Arrays are the caller's, filled up to their
 * capacity (NULL with capacity 0: not wanted). */
typedef struct starling_repair_result {
  size_t struct_size;        /* sizeof(starling_repair_result_t) */
  int old_rank;              /* this rank before the repair */
  int old_size;              /* the context's size before the repair */
  int new_rank;
  int new_size;
  int num_failed;            /* ranks dropped (old numbering) */
  int* old_to_new;           /* [old_size]: old rank -> new rank, -1 for a dropped rank */
  int old_to_new_capacity;
  int* failed;               /* [num_failed]: the dropped ranks, ascending (old numbering) */
  int failed_capacity;
} starling_repair_result_t;

#define STARLING_REPAIR_RESULT_INIT { sizeof(starling_repair_result_t), 0, 0, 0, 0, 0, NULL, 0, NULL, 0 }

/* Repairs a context after a failure. Collective over the SURVIVORS: every live rank
 * calls it (after its failing call returned PEER_FAILED; no other call on the context
 * may run meanwhile, on any thread). Also valid with no failure (nothing is dropped).
 * - Revokes the communicators if this rank knows of a failure (survivors still inside
 *   a call leave it with PEER_FAILED), fails this rank's queued operations, agrees with the other survivors
 *   on who is alive (MPIX_Comm_shrink), renumbers the ranks in their old order
 *   (out->old_to_new), installs the topology (see the options) and drops the machine
 *   topology and dynamic schedules' state (set them again).
 * - Windows stay valid handles and are reshaped over the new topology: a buffer from
 *   an in-neighbor that survived and stays an in-neighbor keeps its contents, version
 *   and associated p; a new in-neighbor's buffer starts as at window_create (this
 *   rank's tensor; zeros for device tensors; p 0); the dead rank's buffers are dropped,
 *   and so is its share of the push-sum mass: with associated p, the survivors' p
 *   values no longer sum to the old size, and p-weighted averaging converges to the
 *   average of what the survivors held (weighted by their p), not of the old world.
 * - Requests of operations that failed stay valid (wait, then free them). Mutexes
 *   are all released.
 * - If a rank fails during the repair, every survivor's repair fails with
 *   PEER_FAILED and the context stays failed: call starling_context_repair again.
 * out may be NULL. Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad struct_size or arrays;
 * a topology whose size is not the number of survivors, found after the shrink: the
 * context then stays failed, call repair again with the right one), UNSUPPORTED (no
 * ULFM: the message says what is needed), ABORTED, PEER_FAILED (see above). */
STARLING_API starling_status_t starling_context_repair(starling_context_t ctx,
                                                       const starling_repair_options_t* options,
                                                       starling_repair_result_t* out);

/* Rejoin (ULFM): the context grows by processes started for it, e.g. a replacement
 * for a rank that died (after starling_context_repair) or extra workers.
 * Options of starling_context_grow (struct_size rule, as the context options). Every
 * current rank passes the same count, ranks, topology and is_weighted (checked: a
 * mismatch is INVALID_ARGUMENT on every rank); command and argv are taken from rank 0. */
typedef struct starling_grow_options {
  size_t struct_size;          /* sizeof(starling_grow_options_t) */
  int count;                   /* processes to start, >= 1 */
  /* [count]: the rank in the grown context of each new process, distinct, in
   * [0, size + count); the current ranks keep their order in the other places (e.g.
   * {1} after rank 1 died and was repaired away: the replacement takes its old rank).
   * NULL: after the current ranks (size, size + 1, ...). BORROWED. */
  const int* ranks;
  /* The program the new processes run. NULL: the same as this process (its
   * executable, /proc/self/exe, with this process's arguments), so an unmodified
   * script is its own replacement. Started in rank 0's working directory, with the
   * launcher's environment. BORROWED. */
  const char* command;
  const char* const* argv;     /* with command: its arguments, NULL-terminated (NULL: none) */
  /* The topology over the grown context (size + count ranks). NULL: the current
   * topology's generator over the new size (it must be one of the generators
   * starling_context_repair regenerates; otherwise INVALID_ARGUMENT: pass one). */
  starling_topology_t topology;
  int is_weighted;             /* with topology: as in starling_set_topology */
} starling_grow_options_t;

#define STARLING_GROW_OPTIONS_INIT { sizeof(starling_grow_options_t), 1, NULL, NULL, NULL, NULL, 0 }

/* What starling_context_grow did. Arrays are the caller's, filled up to their
 * capacity (NULL with capacity 0: not wanted). */
typedef struct starling_grow_result {
  size_t struct_size;      /* sizeof(starling_grow_result_t) */
  int old_rank;
  int old_size;
  int new_rank;
  int new_size;            /* old_size + count */
  int* old_to_new;         /* [old_size]: old rank -> new rank */
  int old_to_new_capacity;
  int* joined;             /* [count]: the new processes' ranks, in the order started */
  int joined_capacity;
} starling_grow_result_t;

#define STARLING_GROW_RESULT_INIT { sizeof(starling_grow_result_t), 0, 0, 0, 0, NULL, 0, NULL, 0 }

/* Grows the context by options->count new processes (rank 0 starts them with
 * MPI_Comm_spawn while the other ranks sleep; a port then connects them to every
 * current rank, MPI_Comm_accept / MPI_Comm_connect). Collective over the current ranks; no other call on the
 * context may run meanwhile, and every operation submitted before it completes first.
 * - The new processes join inside their own starling_context_create (and
 *   starling_init / starling.torch.init()): a process started by a grow (it has an
 *   MPI parent) does not make a context of its own but enters this one, at the rank
 *   options->ranks gives it; starling_joined tells it so (e.g. to fetch the epoch and
 *   the parameters from a neighbor with starling_broadcast instead of initializing
 *   them). Only the first context of a process joins, and only one created without
 *   use_host_comm (so a Starling program that other code spawns with MPI_Comm_spawn
 *   should pass its communicator as host_comm, or it would wait for a grow).
 * - The current ranks are renumbered (out->old_to_new), the topology is installed
 *   (see the options; the machine topology and dynamic schedules' state are dropped,
 *   set them again) and operations then run over the grown context on every member.
 * - Windows: none may exist (INVALID_USAGE naming them): free them before the grow and
 *   create them again after it (the new processes take part in that window_create).
 * - Needs ULFM (the job started with `mpirun --with-ft ulfm` or
 *   `starlingrun --fault-tolerant`): else UNSUPPORTED saying what is needed. Measured
 *   on one host: 1.2-1.3 s for a C newcomer; a Python one adds its imports.
 * - The context must be usable: after a PEER_FAILED, repair it first (INVALID_USAGE).
 * - If the program cannot be started (not found, not executable) or a process fails
 *   during the grow, every current rank gets an error (INVALID_ARGUMENT or
 *   TRANSPORT/PEER_FAILED) and the context stays as it was (PEER_FAILED: failed).
 *   A new process that dies or exits before its context joins gives TRANSPORT where
 *   MPI reports it, else TIMEOUT once STARLING_TIMEOUT_SECONDS (300 s when unset) have
 *   passed since the grow began: a grow never waits forever; the context is unchanged
 *   and usable. A new process that starts after that fails in its context_create.
 * out may be NULL. Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad struct_size, count
 * < 1, ranks out of range or repeated, a topology of the wrong size, options that differ
 * between ranks, bad arrays in out), MISMATCH (a rank makes another call meanwhile, or
 * passes another count), INVALID_USAGE, UNSUPPORTED, ABORTED, PEER_FAILED, TIMEOUT,
 * TRANSPORT. */
STARLING_API starling_status_t starling_context_grow(starling_context_t ctx,
                                                     const starling_grow_options_t* options,
                                                     starling_grow_result_t* out);

/* Resize on demand (ULFM), the other way: chosen ranks leave a running context, e.g. to
 * hand machines back, and the others go on with fewer ranks. With starling_context_grow
 * it resizes a job both ways (4 -> 2 -> 5 in one job: tests/fault, resize).
 * Options of starling_context_shrink (struct_size rule, as the context options). Every
 * rank passes the same count, ranks, topology and is_weighted (checked: a mismatch is
 * INVALID_ARGUMENT on every rank). */
typedef struct starling_shrink_options {
  size_t struct_size;          /* sizeof(starling_shrink_options_t) */
  int count;                   /* ranks that leave, in [1, size - 1] */
  /* [count]: the ranks that leave, distinct, in [0, size). NULL: the last count ranks.
   * BORROWED. */
  const int* ranks;
  /* The topology over the ranks that stay (size - count). NULL: the current topology's
   * generator over the new size when it is one of those starling_context_repair
   * regenerates, otherwise the subgraph the staying ranks induce (renumbered, as a
   * repair does). BORROWED. */
  starling_topology_t topology;
  int is_weighted;             /* with topology: as in starling_set_topology */
} starling_shrink_options_t;

#define STARLING_SHRINK_OPTIONS_INIT { sizeof(starling_shrink_options_t), 1, NULL, NULL, 0 }

/* What starling_context_shrink did. Arrays are the caller's, filled up to their
 * capacity (NULL with capacity 0: not wanted). */
typedef struct starling_shrink_result {
  size_t struct_size;      /* sizeof(starling_shrink_result_t) */
  int old_rank;
  int old_size;
  int new_rank;            /* -1: this rank left */
  int new_size;            /* old_size - count */
  int* old_to_new;         /* [old_size]: old rank -> new rank, -1 for a rank that left */
  int old_to_new_capacity;
  int* left;               /* [count]: the ranks that left, ascending (old numbering) */
  int left_capacity;
} starling_shrink_result_t;

#define STARLING_SHRINK_RESULT_INIT { sizeof(starling_shrink_result_t), 0, 0, 0, 0, NULL, 0, NULL, 0 }

/* Shrinks the context: options->count ranks leave it. Collective over the current
 * ranks; no other call on the context may run meanwhile, and every operation submitted
 * before it completes first.
 * - The ranks that stay are renumbered in their old order (out->old_to_new), the
 *   topology is installed (see the options; the machine topology and dynamic schedules'
 *   state are dropped, set them again) and operations then run over them alone.
 * - On a rank that leaves, the call returns STARLING_SUCCESS with out->new_rank = -1 and
 *   the context is left: every later call on it fails with INVALID_USAGE, and
 *   starling_context_destroy is local. The process then takes part in no more of the
 *   job's Starling calls; it may exit at once, with any status the program chooses
 *   (MPI is not finalized there, since Open MPI's MPI_Finalize waits for every process
 *   of the job; neither is it on the ranks that stay, as after a repair). A process
 *   that a grow started finalizes when it leaves, which waits for the processes started
 *   with it.
 * - Windows: none may exist (INVALID_USAGE naming them): free them before the shrink
 *   and create them again after it.
 * - Needs ULFM (`mpirun --with-ft ulfm` or `starlingrun --fault-tolerant`): else
 *   UNSUPPORTED saying what is needed; a context made by starling_context_split cannot
 *   shrink (INVALID_USAGE). The context must be usable: after a PEER_FAILED, repair it
 *   first (INVALID_USAGE).
 * - If a rank fails during the shrink, every rank gets PEER_FAILED and the context is
 *   as before (failed: repair it).
 * out may be NULL. Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad struct_size, count not
 * in [1, size - 1], ranks out of range or repeated, a topology of the wrong size, options
 * that differ between ranks, bad arrays in out), MISMATCH (a rank makes another call
 * meanwhile, or passes another count), INVALID_USAGE, UNSUPPORTED, ABORTED, PEER_FAILED. */
STARLING_API starling_status_t starling_context_shrink(starling_context_t ctx,
                                                       const starling_shrink_options_t* options,
                                                       starling_shrink_result_t* out);

/* Resizes the context to new_size ranks with the defaults of both calls: a
 * starling_context_shrink of the last size - new_size ranks when smaller, a
 * starling_context_grow by new_size - size processes at the end when larger (running
 * this process's program), nothing when equal. Collective over the current ranks, which
 * pass the same new_size. *left_out (may be NULL) is set to 1 on a rank that left, else 0.
 * Errors: INVALID_ARGUMENT (new_size < 1), and those of the call it makes. */
STARLING_API starling_status_t starling_context_resize(starling_context_t ctx, int new_size, int* left_out);

/* *out = 1 when this process entered ctx through a starling_context_grow of a running
 * job (it was started by it), else 0. Local. Errors: INVALID_HANDLE, INVALID_ARGUMENT. */
STARLING_API starling_status_t starling_joined(starling_context_t ctx, int* out);

/* Splitting a context (MPI_Comm_split): the ranks that pass the same color >= 0 form
 * one new context, ranked by key (ties by their rank in ctx), as torch.distributed's
 * new_group and Horovod's process sets need. A rank passing STARLING_SPLIT_UNDEFINED
 * joins none: *out is set to NULL and the call succeeds.
 * The new context is independent of ctx, as if created by starling_context_create over
 * its ranks: its own progress engine (operations on the two contexts run concurrently),
 * the default topology over its size (exponential-2), its own machine layout
 * (options->nodes_per_machine, else as a new context), windows, timeline file and GPU
 * path. Destroy it like any context (collective over its ranks), before or after ctx.
 * Failures: a rank's death is seen by every context it belongs to; each context is
 * repaired (starling_context_repair) on its own, over its own survivors. A split context
 * cannot grow (starling_context_grow is INVALID_USAGE there: grow the context it came
 * from and split again).
 * Options follow the struct_size rule (STARLING_SPLIT_OPTIONS_INIT); NULL: defaults. */
#define STARLING_SPLIT_UNDEFINED (-1)

/* Options of starling_context_split: initialize with STARLING_SPLIT_OPTIONS_INIT. */
typedef struct starling_split_options {
  size_t struct_size;     /* sizeof(starling_split_options_t) */
  int nodes_per_machine;  /* as in starling_context_options_t (0: detect) */
} starling_split_options_t;

#define STARLING_SPLIT_OPTIONS_INIT { sizeof(starling_split_options_t), 0 }

/* Collective over ctx: every rank calls it, in order with ctx's other operations (it
 * runs after the operations submitted before it). PRODUCES *out (destroy it), or NULL
 * for STARLING_SPLIT_UNDEFINED. Thread safety: as any operation on ctx.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL out, color < 0 other than
 * STARLING_SPLIT_UNDEFINED, bad struct_size or nodes_per_machine < 0), MISMATCH (a
 * rank makes another call on ctx meanwhile), ABORTED, PEER_FAILED, TIMEOUT, TRANSPORT. */
STARLING_API starling_status_t starling_context_split(starling_context_t ctx, int color, int key,
                                                      const starling_split_options_t* options,
                                                      starling_context_t* out);

/* Layout queries. Local, no communication. "Machines" are groups of ranks on one host
 * (or simulated, see nodes_per_machine); machines are numbered by their lowest rank.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL out). */
STARLING_API starling_status_t starling_rank(starling_context_t ctx, int* out);
STARLING_API starling_status_t starling_size(starling_context_t ctx, int* out);
STARLING_API starling_status_t starling_local_rank(starling_context_t ctx, int* out);
STARLING_API starling_status_t starling_local_size(starling_context_t ctx, int* out);
STARLING_API starling_status_t starling_machine_rank(starling_context_t ctx, int* out);
STARLING_API starling_status_t starling_machine_size(starling_context_t ctx, int* out);
/* *out = 1 if every machine has the same number of ranks and ranks are numbered
 * contiguously per machine (rank = machine_rank * local_size + local_rank). */
STARLING_API starling_status_t starling_is_homogeneous(starling_context_t ctx, int* out);

/* Counters of a context since its creation, for tuning and monitoring. Local. */
typedef struct starling_stats {
  size_t struct_size;          /* sizeof(starling_stats_t) */
  uint64_t operations;         /* operations finished (successfully or not) */
  uint64_t fused_operations;   /* of those, operations that travelled in a fused group */
  uint64_t fusion_groups;      /* fused groups (of 2 or more operations) */
  uint64_t messages_sent;      /* point-to-point messages handed to MPI */
  uint64_t bytes_sent;         /* handed to MPI, or published in shared memory for same-host peers */
  uint64_t scratch_bytes;      /* scratch memory the context holds now (reused) */
  uint64_t staged_bytes;       /* bytes copied between CUDA tensors and host staging buffers */
  uint64_t gpu_path;           /* STARLING_GPU_PATH_*: how CUDA tensors move (starling_gpu_path says why) */
  /* Compressed operations (starling_allreduce_compressed and friends): the payload
   * bytes they handed to MPI (after compression) and what the same payloads would have
   * been uncompressed (before). bytes_sent counts both kinds of traffic, headers too. */
  uint64_t bytes_before_compression;
  uint64_t bytes_after_compression;
  /* Messages and bytes received. The message counts are MPI's; the bytes cover every
   * operation's and window's data, headers included (not the failure detector's), and,
   * like bytes_sent, also the data same-host peers exchanged through shared memory. */
  uint64_t messages_received;
  uint64_t bytes_received;
  /* Nanoseconds the application's threads spent inside blocking calls and request
   * waits (running operations or waiting for them): the time communication held the
   * application up. Threads waiting at once each count. */
  uint64_t blocked_ns;
  /* Of bytes_sent and bytes_received, those that went through shared memory (neighbor
   * data, and window puts and accumulates, between ranks of one host) instead of MPI.
   * A window's target counts what its origins wrote there when it next updates, reads
   * the versions of, or frees the window. */
  uint64_t shm_bytes_sent;
  uint64_t shm_bytes_received;
} starling_stats_t;

#define STARLING_STATS_INIT { sizeof(starling_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* starling_stats_t.gpu_path. */
enum starling_gpu_path_code {
  STARLING_GPU_PATH_NONE = 0,    /* no collective on CUDA tensors yet (or none at all) */
  STARLING_GPU_PATH_STAGED = 1,  /* pinned host copies and the MPI algorithms */
  STARLING_GPU_PATH_NCCL = 2     /* NCCL between the ranks' GPUs */
};

/* Fills *out (whose struct_size must be set). Errors: INVALID_HANDLE, INVALID_ARGUMENT. */
STARLING_API starling_status_t starling_get_stats(starling_context_t ctx, starling_stats_t* out);

/* Traffic with one peer (a rank of the context) since the context's creation, or since
 * its last repair or grow, which renumber the ranks. Local. For spotting a slow rank or
 * link: each step of an operation that exchanges messages with a peer waits from its
 * start until the last of them completed (the peer's arrived, and the peer took ours);
 * a peer that is late (slow, or behind) or sits behind a slow link shows long waits. */
typedef struct starling_peer_stats {
  size_t struct_size;          /* sizeof(starling_peer_stats_t) */
  uint64_t messages_sent;      /* to this peer, handed to MPI */
  uint64_t bytes_sent;         /* through MPI or shared memory */
  uint64_t messages_received;  /* from this peer */
  uint64_t bytes_received;
  uint64_t waits;              /* operation steps that exchanged messages with this peer */
  uint64_t wait_ns;            /* their total wait for this peer, nanoseconds */
  uint64_t last_wait_ns;       /* the most recent one's wait */
  /* The last starling_probe_peers' figures for this peer (0: never probed). */
  uint64_t probe_latency_ns;
  uint64_t probe_bytes_per_second;
} starling_peer_stats_t;

#define STARLING_PEER_STATS_INIT { sizeof(starling_peer_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Fills *out (whose struct_size must be set) for rank `peer` (0 .. size-1).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL out, bad struct_size, peer out of range). */
STARLING_API starling_status_t starling_get_peer_stats(starling_context_t ctx, int peer,
                                                       starling_peer_stats_t* out);

/* Options of starling_probe_peers; NULL means all defaults. */
typedef struct starling_probe_args {
  size_t struct_size;   /* sizeof(starling_probe_args_t) */
  int repetitions;      /* round trips per peer and kind, the best kept (0: 5; at most 1000) */
  uint64_t bulk_bytes;  /* the throughput pings' size (0: 1 MiB; at most 1 GiB) */
} starling_probe_args_t;

#define STARLING_PROBE_ARGS_INIT { sizeof(starling_probe_args_t), 0, 0 }

/* Measures this rank's latency to every other rank, and its throughput to it, by
 * ping-pong (KungFu's peer latencies, and more). Collective and blocking: every rank
 * calls it with the same args. In round r = 1 .. size-1 each rank i pings i + r while
 * answering i - r, so all ranks probe at once (a shared link or memory bus is measured
 * loaded, as in training) and no clocks need to agree. Latency: half the best round
 * trip of header-only pings; throughput: bulk_bytes over the best round trip of a
 * bulk ping less the header-only one. Takes size - 1 rounds of 2 * repetitions round
 * trips: milliseconds on one host, proportional to the number of ranks.
 * latency_seconds and bytes_per_second: NULL, or room for `count` >= size values,
 * written by rank (this rank's own entries 0). The figures are also kept in
 * starling_peer_stats_t (probe_latency_ns, probe_bytes_per_second) until the next
 * probe; the probe's own messages and waits count in the peer stats too.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad args, count < size with an output),
 * MISMATCH (ranks call it with different args, or make other calls meanwhile),
 * ABORTED, PEER_FAILED, TIMEOUT, TRANSPORT. */
STARLING_API starling_status_t starling_probe_peers(starling_context_t ctx, const starling_probe_args_t* args,
                                                    double* latency_seconds, double* bytes_per_second,
                                                    int count);

/* ---------------------------------------------------------------------------------
 * CUDA tensors. Every operation also takes tensors in CUDA device memory (kDLCUDA) or
 * managed memory (kDLCUDAManaged); pinned host memory (kDLCUDAHost) is host memory.
 * - All tensors of one call are on one device, and one context uses one GPU per rank:
 *   the device of its first CUDA tensor. Anything else is INVALID_ARGUMENT naming the
 *   tensors, as is a tensor whose data pointer is not device memory of its device.
 * - The CUDA code lives in libstarling_cuda.so (beside libstarling.so, or the file named
 *   by STARLING_DEVICE_PLUGIN), loaded on the first CUDA tensor; the CUDA runtime and
 *   NCCL are never linked into libstarling.so. What is missing (a build without CUDA, no
 *   driver, no device) makes the call fail with UNSUPPORTED naming it; failures of the
 *   CUDA runtime or NCCL are STARLING_ERR_DEVICE naming the call.
 * - Paths (STARLING_GPU_PATH, starling_gpu_path): "staged" copies the tensors through
 *   pooled pinned host buffers on a stream of Starling's and runs the CPU algorithm on
 *   them, pipelining large element-wise operations in chunks of STARLING_GPU_CHUNK_BYTES.
 * - Streams (DLPack's contract): an operation starts after the work that was queued on
 *   the calling thread's stream (starling_set_cuda_stream) when it was called, and its
 *   results are in device memory when a blocking call returns or its request completes,
 *   ready for every stream. Nothing synchronizes the caller's stream or the device.
 *   While that stream is being captured into a CUDA graph, operations on CUDA tensors
 *   fail with STARLING_ERR_INVALID_USAGE before touching it (they wait from the host,
 *   which a graph cannot hold), so the capture stays valid.
 * - Windows may be backed by device memory (every rank's, or none's): puts,
 *   accumulates and gets copy it, updates combine it through host memory. */

/* Sets the CUDA stream (a cudaStream_t) that this thread's later operations on CUDA
 * tensors order against; NULL (the default) is the legacy default stream. A
 * thread-local setting, like CUDA's current device: pass the framework's current
 * stream before each call (the Python binding does). The stream must belong to the
 * device of the tensors. Local; never fails. */
STARLING_API starling_status_t starling_set_cuda_stream(void* stream);
/* *out = this thread's stream (NULL by default). Errors: INVALID_ARGUMENT (NULL out). */
STARLING_API starling_status_t starling_get_cuda_stream(void** out);
/* *out = how this context moves CUDA tensors, and why: "none (no CUDA tensor used
 * yet)", or "staged on cuda:0: ..." naming the reason. Thread-local text, valid until
 * this thread's next call of this function. Local.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL out). */
STARLING_API starling_status_t starling_gpu_path(starling_context_t ctx, const char** out);

/* The timeline: with STARLING_TIMELINE=<prefix>, each rank writes <prefix><rank>.json
 * (a second context in the same process: <prefix><rank>.1.json, and so on)
 * (Chrome trace format: open in chrome://tracing or ui.perfetto.dev) with every
 * operation's submission and execution and the activities marked below, one lane per
 * name. The file is complete once the context is destroyed. */
/* *out = 1 if this context writes a timeline. */
STARLING_API starling_status_t starling_timeline_enabled(starling_context_t ctx, int* out);
/* Starts / ends a user activity (e.g. "FORWARD") on lane `name`. Activities on one lane
 * nest. Errors: INVALID_USAGE when the timeline is off, INVALID_ARGUMENT (NULL). */
STARLING_API starling_status_t starling_timeline_start_activity(starling_context_t ctx, const char* name,
                                                                const char* activity);
STARLING_API starling_status_t starling_timeline_end_activity(starling_context_t ctx, const char* name);

/* ---------------------------------------------------------------------------------
 * Requests: the handle of a _nonblocking call.
 *
 * A request carries its operation's final status. It must be freed with
 * starling_request_free once finished, also after an error. */

/* STARLING_IN_PROGRESS while running, else the final status (repeatable). Never
 * blocks: the progress thread finishes the operation in the background.
 * Errors: INVALID_HANDLE, or the operation's own error. */
STARLING_API starling_status_t starling_request_test(starling_request_t req);

/* Blocks until the operation finishes and returns its final status; on error,
 * starling_last_error() has the operation's message. Waiting a second time on the
 * same request is an error (INVALID_USAGE): keep the first result.
 * Errors: INVALID_HANDLE, INVALID_USAGE, or the operation's own error. */
STARLING_API starling_status_t starling_request_wait(starling_request_t req);

/* Releases a finished request. Freeing a request that is still running is an error
 * (INVALID_USAGE: wait for it first, its tensors are in use); freeing twice gives
 * INVALID_HANDLE. */
STARLING_API starling_status_t starling_request_free(starling_request_t req);

/* ---------------------------------------------------------------------------------
 * Classic collectives. All are collective over the context; `name` (may be NULL) is
 * a label for diagnostics and the timeline, not a rendezvous key. */

/* The reduction of starling_allreduce and starling_local_allreduce. */
typedef enum starling_reduce_op {
  STARLING_SUM = 0,
  STARLING_AVERAGE = 1,  /* sum / size; floating-point dtypes only */
  STARLING_MIN = 2,
  STARLING_MAX = 3
} starling_reduce_op_t;

/* out = op over all ranks of in. in and out have the same dtype and shape (or are
 * the same tensor). Integer sums wrap around (two's complement); float16/bfloat16
 * are reduced in float32 and rounded once per step. Every rank gets bit-identical
 * results. Where the ranks form several machines with the same number (>= 2) of
 * consecutive ranks each, large tensors are reduced inside each machine, then across
 * machines, then shared inside each machine: less traffic between machines, and another
 * (still fixed) order of the reduction than on one machine.
 * Collective. BORROWS in, out.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT, UNSUPPORTED, MISMATCH, TIMEOUT, TRANSPORT. */
STARLING_API starling_status_t starling_allreduce(starling_context_t ctx, const DLTensor* in,
                                                  DLTensor* out, starling_reduce_op_t op,
                                                  const char* name);
STARLING_API starling_status_t starling_allreduce_nonblocking(starling_context_t ctx,
                                                              const DLTensor* in, DLTensor* out,
                                                              starling_reduce_op_t op,
                                                              const char* name,
                                                              starling_request_t* req);

/* Every rank's out = root's in. in and out have the same dtype and shape on every rank
 * (or are the same tensor); `in` is only read on the root.
 * Collective. BORROWS in, out.
 * Errors: as allreduce; INVALID_ARGUMENT for a root out of range. */
STARLING_API starling_status_t starling_broadcast(starling_context_t ctx, const DLTensor* in,
                                                  DLTensor* out, int root, const char* name);
STARLING_API starling_status_t starling_broadcast_nonblocking(starling_context_t ctx,
                                                              const DLTensor* in, DLTensor* out,
                                                              int root, const char* name,
                                                              starling_request_t* req);

/* out = concatenation along dimension 0 of every rank's in, in rank order. The first
 * dimension may differ between ranks; the other dimensions and the dtype must agree.
 * out's first dimension must be the sum of all ranks' first dimensions (use
 * starling_allgather_first_dims to learn them). If first_dims is not NULL it receives
 * size() entries: each rank's first dimension. in must have at least one dimension.
 * Collective. BORROWS in, out, first_dims.
 * Errors: as allreduce; MISMATCH when out is too small or too large on some rank. */
STARLING_API starling_status_t starling_allgather(starling_context_t ctx, const DLTensor* in,
                                                  DLTensor* out, int64_t* first_dims,
                                                  const char* name);
STARLING_API starling_status_t starling_allgather_nonblocking(starling_context_t ctx,
                                                              const DLTensor* in, DLTensor* out,
                                                              int64_t* first_dims,
                                                              const char* name,
                                                              starling_request_t* req);

/* first_dims[r] = first dimension of rank r's `in` (size() entries), checking that the
 * dtype and the other dimensions agree. A cheap step before allgather when the sizes
 * are not known.
 * Collective. BORROWS in (only its shape is read), first_dims. */
STARLING_API starling_status_t starling_allgather_first_dims(starling_context_t ctx,
                                                             const DLTensor* in,
                                                             int64_t* first_dims,
                                                             const char* name);
STARLING_API starling_status_t starling_allgather_first_dims_nonblocking(
    starling_context_t ctx, const DLTensor* in, int64_t* first_dims, const char* name,
    starling_request_t* req);

/* Reduce-scatter: out = this rank's block of (op over all ranks of in). in is cut
 * into size() consecutive blocks in rank order: with counts NULL, equal blocks of
 * out's element count each (in has size() times as many elements as out); otherwise
 * counts[r] (size() entries, each >= 0, the same on every rank, summing to in's
 * element count) is block r's element count, and out has counts[rank] elements. in and
 * out have the same dtype; their shapes are free beyond that. Reduction ops and dtypes
 * as allreduce (AVERAGE divides by size(); floating dtypes only); each element is
 * reduced in a fixed order (rank order for small inputs, ring order for large ones),
 * so the same call gives the same bits run to run. In place
 * when out is exactly this rank's block of in (the same memory); any other overlap of
 * in and out is INVALID_ARGUMENT (CUDA tensors too). CUDA tensors on the NCCL path:
 * ncclReduceScatter for equal blocks, otherwise each rank's part of this rank's block
 * is received and reduced in rank order (docs/concepts/gpus.md).
 * Collective. BORROWS in, out; counts is copied before the call returns.
 * Thread safety: as every operation (see the top of this file).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL tensors, dtypes differ, element counts
 * that do not fit the blocks, a negative count, counts that do not sum to in's element
 * count), UNSUPPORTED (AVERAGE on integers), MISMATCH (ranks disagree on the op, dtype,
 * element count or counts), TIMEOUT, TRANSPORT. */
STARLING_API starling_status_t starling_reduce_scatter(starling_context_t ctx, const DLTensor* in,
                                                       DLTensor* out, const int64_t* counts,
                                                       starling_reduce_op_t op, const char* name);
STARLING_API starling_status_t starling_reduce_scatter_nonblocking(starling_context_t ctx,
                                                                   const DLTensor* in, DLTensor* out,
                                                                   const int64_t* counts,
                                                                   starling_reduce_op_t op,
                                                                   const char* name,
                                                                   starling_request_t* req);

/* All-to-all (MPI_Alltoall / MPI_Alltoallv): this rank sends block q of in to rank q
 * and receives rank q's block for it into block q of out, blocks in rank order. With
 * send_counts and recv_counts both NULL the blocks are equal: in and out have the same
 * element count, a multiple of size(). Otherwise both are given (size() entries each,
 * >= 0, in elements): send_counts sums to in's element count, recv_counts to out's, and
 * recv_counts[q] on this rank must equal send_counts[rank] on rank q (use an equal-block
 * alltoall of the counts to learn them). in and out have the same dtype (any supported
 * dtype; the data is moved, never combined), shapes free beyond that, and must not
 * overlap (no in place). CUDA tensors on the NCCL path go by grouped ncclSend/ncclRecv.
 * Collective. BORROWS in, out; the counts are copied before the call returns.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL tensors, dtypes differ, only one of the
 * count arrays given, a negative count, counts that do not sum to the element counts,
 * an equal-block size that is not a multiple of size(), in and out overlap), MISMATCH
 * (ranks disagree on the dtype or on what one sends and the other expects: every rank
 * fails, the message names the two ranks and the counts), TIMEOUT, TRANSPORT. */
STARLING_API starling_status_t starling_alltoall(starling_context_t ctx, const DLTensor* in,
                                                 DLTensor* out, const int64_t* send_counts,
                                                 const int64_t* recv_counts, const char* name);
STARLING_API starling_status_t starling_alltoall_nonblocking(starling_context_t ctx,
                                                             const DLTensor* in, DLTensor* out,
                                                             const int64_t* send_counts,
                                                             const int64_t* recv_counts,
                                                             const char* name,
                                                             starling_request_t* req);

/* Returns once every rank has entered the barrier. Collective. */
STARLING_API starling_status_t starling_barrier(starling_context_t ctx);
STARLING_API starling_status_t starling_barrier_nonblocking(starling_context_t ctx,
                                                            starling_request_t* req);

/* ---------------------------------------------------------------------------------
 * Topologies: weighted directed graphs over `size` ranks. Edge i -> j with weight w
 * means rank j receives rank i's tensor scaled by w; an edge r -> r is r's self
 * weight. Topologies are local objects (no communication); the generators produce the
 * same edges and weights as BlueFog's topology_util (see docs/tutorials/migrating-from-bluefog.md
 * for the one deliberate difference). PRODUCES *out: free it with starling_topology_free.
 * Errors: INVALID_ARGUMENT (size < 1, bad parameters, NULL out). */

/* The edges of starling_topology_ring. */
typedef enum starling_ring_style {
  STARLING_RING_BIDIRECTIONAL = 0, /* i <-> i-1, i+1; weights 1/3 */
  STARLING_RING_LEFT = 1,          /* i sends to i-1; weights 1/2 */
  STARLING_RING_RIGHT = 2          /* i sends to i+1; weights 1/2 */
} starling_ring_style_t;

/* A graph from explicit edges: sources[k] -> destinations[k] with weights[k]
 * (weights NULL: every weight 1.0). Ranks must be in [0, size), weights finite and
 * >= 0, and no edge may repeat. */
STARLING_API starling_status_t starling_topology_create(int size, int num_edges,
                                                        const int* sources,
                                                        const int* destinations,
                                                        const double* weights,
                                                        starling_topology_t* out);
/* i -> i + 2^k (mod size) for every 2^k < size, plus self; uniform weights. */
STARLING_API starling_status_t starling_topology_exponential_two(int size,
                                                                 starling_topology_t* out);
/* i -> i + base^k (mod size) for every base^k < size, plus self; uniform weights.
 * Powers are tested exactly (BlueFog's float test drops e.g. 243 for base 3). */
STARLING_API starling_status_t starling_topology_exponential(int size, int base,
                                                             starling_topology_t* out);
/* i -> i +- base^k (mod size), plus self; uniform weights. */
STARLING_API starling_status_t starling_topology_symmetric_exponential(
    int size, int base, starling_topology_t* out);
/* rows x cols grid without wrap-around, Metropolis-Hastings weights. rows = cols = 0
 * picks the most square shape with rows <= cols. */
STARLING_API starling_status_t starling_topology_mesh_grid_2d(int size, int rows, int cols,
                                                              starling_topology_t* out);
STARLING_API starling_status_t starling_topology_star(int size, int center,
                                                      starling_topology_t* out);
STARLING_API starling_status_t starling_topology_ring(int size, starling_ring_style_t style,
                                                      starling_topology_t* out);
STARLING_API starling_status_t starling_topology_fully_connected(int size,
                                                                 starling_topology_t* out);
STARLING_API starling_status_t starling_topology_free(starling_topology_t topo);

/* *out = the number of ranks the graph spans. */
STARLING_API starling_status_t starling_topology_size(starling_topology_t topo, int* out);
/* Number of edges, self-loops included. */
STARLING_API starling_status_t starling_topology_num_edges(starling_topology_t topo, int* out);
/* Copies the edges sorted by (source, destination). capacity >= num_edges. */
STARLING_API starling_status_t starling_topology_edges(starling_topology_t topo, int* sources,
                                                       int* destinations, double* weights,
                                                       int capacity);

/* List queries share one convention: *count is always set to the full number of
 * entries; the arrays (which may be NULL when capacity is 0) receive them in ascending
 * rank order; a capacity smaller than *count is INVALID_ARGUMENT. Self is excluded. */
STARLING_API starling_status_t starling_topology_in_neighbors(starling_topology_t topo, int rank,
                                                              int* ranks, int capacity,
                                                              int* count);
STARLING_API starling_status_t starling_topology_out_neighbors(starling_topology_t topo,
                                                               int rank, int* ranks,
                                                               int capacity, int* count);
/* Weights rank receives with: *self_weight (0 without a self-loop) and, per
 * in-neighbor, the weight of the edge neighbor -> rank. */
STARLING_API starling_status_t starling_topology_recv_weights(starling_topology_t topo,
                                                              int rank, double* self_weight,
                                                              int* ranks, double* weights,
                                                              int capacity, int* count);
/* Weights rank sends with: *self_weight and, per out-neighbor, edge rank -> neighbor. */
STARLING_API starling_status_t starling_topology_send_weights(starling_topology_t topo,
                                                              int rank, double* self_weight,
                                                              int* ranks, double* weights,
                                                              int capacity, int* count);
/* *out = 1 if every rank has the same degree (in + out, a self-loop counting twice). */
STARLING_API starling_status_t starling_topology_is_regular(starling_topology_t topo, int* out);
/* *out = 1 if both graphs have the same size and exactly the same weighted edges. */
STARLING_API starling_status_t starling_topology_is_equivalent(starling_topology_t a,
                                                               starling_topology_t b, int* out);

/* ---------------------------------------------------------------------------------
 * Dynamic schedules: iterators yielding, per step, the ranks this rank sends to and
 * receives from (BlueFog's Get*SendRecvRanks generators). Every rank advances its own
 * schedule once per step, in lockstep. PRODUCES *out: free with starling_schedule_free. */

/* One peer per step, cycling through topo's out-neighbors in clockwise order. The
 * topology must give every rank a self-loop and at least one out-neighbor. */
STARLING_API starling_status_t starling_schedule_dynamic_one_peer(starling_topology_t topo,
                                                                  int rank,
                                                                  starling_schedule_t* out);
/* Machine ids (not ranks): machine m sends to m + 2^k and receives from m - 2^k. */
STARLING_API starling_status_t starling_schedule_exp2_machine(int world_size, int local_size,
                                                              int rank, int local_rank,
                                                              starling_schedule_t* out);
/* One rank per machine (rotating) talks along the machine ring, the others along the
 * ring inside their machine. local_size > 2. */
STARLING_API starling_status_t starling_schedule_inner_outer_ring(int world_size,
                                                                  int local_size, int rank,
                                                                  starling_schedule_t* out);
/* As inner_outer_ring with exponential-2 distances inside and between machines. */
STARLING_API starling_status_t starling_schedule_inner_outer_expo2(int world_size,
                                                                   int local_size, int rank,
                                                                   starling_schedule_t* out);
/* Pairwise averaging over fast links, for jobs with slow links or slow ranks: step t
 * pairs the ranks as round t of a round-robin tournament (every pair meets once in
 * size - 1 rounds, size for an odd size, where one rank sits each round out). A pair
 * whose link takes longer than threshold_seconds in either direction skips the step, and
 * rounds in which no pair of the job is fast are left out. A step yields ([peer],
 * [peer]) or ([], []): average with weight 1/2 each (1 for a rank alone) and every
 * step's mixing matrix is symmetric and doubly stochastic. link_seconds holds
 * world_size * world_size figures, row i being rank i's time to each rank (e.g. the
 * latencies of starling_probe_peers, gathered from every rank); the diagonal is
 * ignored, and every rank must pass the same figures. INVALID_ARGUMENT names the groups
 * when the links within the threshold leave the job split (they would never mix). */
STARLING_API starling_status_t starling_schedule_fast_pairs(int world_size, int rank,
                                                            const double* link_seconds,
                                                            int num_link_seconds,
                                                            double threshold_seconds,
                                                            starling_schedule_t* out);
/* Yields the next step's sets (list convention as above, for both lists) and
 * advances. send_count/recv_count are set even when a capacity is too small, in which
 * case the schedule does not advance. */
STARLING_API starling_status_t starling_schedule_next(starling_schedule_t sched, int* send_ranks,
                                                      int send_capacity, int* send_count,
                                                      int* recv_ranks, int recv_capacity,
                                                      int* recv_count);
STARLING_API starling_status_t starling_schedule_free(starling_schedule_t sched);

/* ---------------------------------------------------------------------------------
 * The topology of a context. A new context starts with the unweighted exponential-2
 * graph (BlueFog's default) and no machine topology. */

/* Sets the graph neighbor operations use. is_weighted = 1: operations default to the
 * graph's weights; 0: to the uniform average over self and in-neighbors.
 * Collective: every rank must pass the same graph and flag; otherwise every rank
 * gets STARLING_ERR_MISMATCH and the old topology stays. Operations already submitted
 * keep the topology they were submitted with. BORROWS topo (copied).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (graph size != context size), MISMATCH,
 * INVALID_USAGE (windows exist: free them first). */
STARLING_API starling_status_t starling_set_topology(starling_context_t ctx, starling_topology_t topo,
                                                     int is_weighted);
/* *out = a new handle holding a copy of the context's topology; *is_weighted (may be
 * NULL) = its flag. PRODUCES *out. Local. */
STARLING_API starling_status_t starling_get_topology(starling_context_t ctx, starling_topology_t* out,
                                                     int* is_weighted);
/* The graph over machines that hierarchical_neighbor_allreduce uses. The layout must
 * be homogeneous and topo's size must equal machine_size(). Collective, as above. */
STARLING_API starling_status_t starling_set_machine_topology(starling_context_t ctx,
                                                             starling_topology_t topo,
                                                             int is_weighted);
/* As get_topology; *out = NULL when no machine topology was set. */
STARLING_API starling_status_t starling_get_machine_topology(starling_context_t ctx,
                                                             starling_topology_t* out,
                                                             int* is_weighted);
/* This rank's in-/out-neighbors in the context's topology (list convention above). */
STARLING_API starling_status_t starling_in_neighbors(starling_context_t ctx, int* ranks,
                                                     int capacity, int* count);
STARLING_API starling_status_t starling_out_neighbors(starling_context_t ctx, int* ranks,
                                                      int capacity, int* count);

/* ---------------------------------------------------------------------------------
 * Neighbor collectives: decentralized averaging over the topology.
 *
 * Static mode (dynamic = 0): every rank sends to its out-neighbors and receives from
 * its in-neighbors. Weights: with use_weights = 0, the topology's weights if it was
 * set weighted, else the uniform average (x + sum of in-neighbors) / (in_degree + 1);
 * with use_weights = 1, self_weight and one weight per listed source (sources must be
 * in-neighbors; unlisted in-neighbors get weight 0).
 * Dynamic mode (dynamic = 1): this call's own graph. Each rank sends to
 * destination_ranks (optionally scaling what each receives by destination_weights)
 * and receives from source_ranks with source_weights; use_weights must be 1. Ranks
 * may be any ranks (not only topology neighbors), unique, never self. With
 * check_topology = 1 the ranks first verify collectively that every send has a
 * matching receive; a disagreement fails on every rank with STARLING_ERR_MISMATCH
 * naming the ranks, before any data moves.
 * Weights must be finite and >= 0.
 *
 * Result: out = self_weight * in + sum over sources j of w_j * d_j * in_j, where d_j
 * is the weight source j sent with (1 by default). Every dtype is supported; integer
 * results are computed in float64, rounded to nearest and saturated. In place when
 * in == out.
 *
 * Consecutive nonblocking neighbor_allreduce calls with the same dtype, neighbors and
 * weights are fused into one message per peer, up to STARLING_FUSION_THRESHOLD bytes;
 * results are identical to unfused calls. Ranks may fuse differently.
 *
 * Collective: every rank calls it in the same order (also ranks that send and
 * receive nothing). A rank receiving data of another dtype, size or operation from a
 * neighbor fails with STARLING_ERR_MISMATCH naming the neighbor. */
typedef struct starling_neighbor_args {
  size_t struct_size;            /* sizeof(starling_neighbor_args_t) */
  int use_weights;               /* 1: self_weight and source_weights below */
  double self_weight;
  int num_sources;
  const int* source_ranks;       /* static: in-neighbors to weight; dynamic: ranks to receive from */
  const double* source_weights;
  int dynamic;                   /* 1: destination_ranks / source_ranks replace the topology */
  int num_destinations;
  const int* destination_ranks;
  const double* destination_weights; /* NULL: 1.0 for every destination */
  int check_topology;            /* dynamic only: verify sends and receives match */
  const char* name;              /* label for diagnostics and the timeline; may be NULL */
} starling_neighbor_args_t;

#define STARLING_NEIGHBOR_ARGS_INIT \
  { sizeof(starling_neighbor_args_t), 0, 0.0, 0, NULL, NULL, 0, 0, NULL, NULL, 0, NULL }

/* args may be NULL (static mode, default weights). BORROWS in, out, args' arrays
 * (copied before the call returns). */
STARLING_API starling_status_t starling_neighbor_allreduce(starling_context_t ctx, const DLTensor* in,
                                                           DLTensor* out,
                                                           const starling_neighbor_args_t* args);
STARLING_API starling_status_t starling_neighbor_allreduce_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args,
    starling_request_t* req);

/* out = the sources' tensors concatenated along dimension 0, in source order: static
 * mode, the in-neighbors in ascending rank order; dynamic mode, source_ranks in the
 * order given. Self is not included. First dimensions may differ; out's first
 * dimension must equal their sum (see starling_neighbor_allgather_first_dims);
 * first_dims (NULL or num_sources entries) receives them. Weights are ignored.
 * Collective, like neighbor_allreduce. */
STARLING_API starling_status_t starling_neighbor_allgather(starling_context_t ctx, const DLTensor* in,
                                                           DLTensor* out, int64_t* first_dims,
                                                           const starling_neighbor_args_t* args);
STARLING_API starling_status_t starling_neighbor_allgather_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, int64_t* first_dims,
    const starling_neighbor_args_t* args, starling_request_t* req);
/* The sources' first dimensions, in source order (first_dims has one entry per source:
 * in-degree in static mode). Collective. */
STARLING_API starling_status_t starling_neighbor_allgather_first_dims(
    starling_context_t ctx, const DLTensor* in, int64_t* first_dims,
    const starling_neighbor_args_t* args);

/* Hierarchical neighbor allreduce: ranks average inside their machine, the machines'
 * first local ranks run a neighbor allreduce over the machine topology (args name
 * machine ids, not ranks: static or dynamic exactly as above), and the result is
 * shared inside each machine. The result is the weighted average of per-machine
 * means. Needs a homogeneous layout with local_size() >= 2 and, in static mode, a
 * machine topology. Collective. */
STARLING_API starling_status_t starling_hierarchical_neighbor_allreduce(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args);
STARLING_API starling_status_t starling_hierarchical_neighbor_allreduce_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args,
    starling_request_t* req);

/* Allreduce among the ranks of this rank's machine only (BlueFog's
 * allreduce(is_hierarchical_local=True)). Collective over the context. */
STARLING_API starling_status_t starling_local_allreduce(starling_context_t ctx, const DLTensor* in,
                                                        DLTensor* out, starling_reduce_op_t op,
                                                        const char* name);
STARLING_API starling_status_t starling_local_allreduce_nonblocking(starling_context_t ctx,
                                                                    const DLTensor* in, DLTensor* out,
                                                                    starling_reduce_op_t op,
                                                                    const char* name,
                                                                    starling_request_t* req);

/* Two ranks average with each other: out = self_weight * in + pair_weight * peer's in.
 * Only this rank and `peer` call it (each naming the other), not the whole context.
 * Weights finite and >= 0 (BlueFog's default: 0.5 and 0.5).
 * Errors: INVALID_ARGUMENT (peer out of range or self), MISMATCH (the peer sent another
 * dtype or size). */
STARLING_API starling_status_t starling_pair_gossip(starling_context_t ctx, const DLTensor* in,
                                                    DLTensor* out, int peer, double self_weight,
                                                    double pair_weight, const char* name);
STARLING_API starling_status_t starling_pair_gossip_nonblocking(starling_context_t ctx,
                                                                const DLTensor* in, DLTensor* out,
                                                                int peer, double self_weight,
                                                                double pair_weight,
                                                                const char* name,
                                                                starling_request_t* req);

/* ---------------------------------------------------------------------------------
 * Compressed communication (docs/concepts/compression.md has the details).
 *
 * Compressors, on floating-point tensors only (float16, bfloat16, float32, float64;
 * anything else is UNSUPPORTED):
 * - STARLING_COMPRESS_FLOAT16 / _BFLOAT16: every element rounded to nearest (float16
 *   saturates finite values at +-65504).
 * - STARLING_COMPRESS_TOPK: the k elements of largest magnitude (ties: lower index),
 *   sent as (uint32 index, value) pairs; values in float32 (float64 for float64 tensors).
 * - STARLING_COMPRESS_RANDOMK: k elements chosen by a generator that every rank seeds
 *   alike from (seed, name, step), so only the values travel. step counts this rank's
 *   calls under the name (ranks out of step get MISMATCH). Not rescaled (biased, like
 *   top-k): use it with error feedback or CHOCO.
 * - STARLING_COMPRESS_SIGN: one bit per element and one scale per tensor (the mean
 *   magnitude): each element becomes +-scale.
 * k: top-k and random-k keep `k` elements (1 <= k <= element count) or, with k = 0,
 * ceil(ratio * element count) (0 < ratio <= 1). Indices are 32-bit: tensors of 2^32
 * elements or more are INVALID_ARGUMENT with these two.
 *
 * State: error feedback and CHOCO keep per-tensor state in the context under the
 * call's `name` (required then). A name reused with another dtype, shape, compressor
 * or (CHOCO) in-neighbor set is INVALID_ARGUMENT; starling_compression_reset drops it.
 * The options follow the struct_size rule (STARLING_COMPRESSION_INIT). */
typedef enum starling_compressor {
  STARLING_COMPRESS_NONE = 0,     /* plain operation (the options are ignored) */
  STARLING_COMPRESS_FLOAT16 = 1,
  STARLING_COMPRESS_BFLOAT16 = 2,
  STARLING_COMPRESS_TOPK = 3,
  STARLING_COMPRESS_RANDOMK = 4,
  STARLING_COMPRESS_SIGN = 5
} starling_compressor_t;

/* How a compressed call compresses: initialize with STARLING_COMPRESSION_INIT (no
 * compression), then set compressor and its parameters. */
typedef struct starling_compression {
  size_t struct_size;         /* sizeof(starling_compression_t) */
  int compressor;             /* starling_compressor_t */
  int64_t k;                  /* top-k / random-k: elements kept; 0: use ratio */
  double ratio;               /* top-k / random-k with k == 0: fraction kept, (0, 1] */
  uint64_t seed;              /* random-k: the same on every rank */
  /* allreduce: 1 = error feedback: each rank compresses (in + residual) and keeps
   * what the compression dropped as the next call's residual (per name). */
  int error_feedback;
  /* neighbor_allreduce: the CHOCO consensus step size, 0 < gamma <= 1. */
  double gamma;
} starling_compression_t;

#define STARLING_COMPRESSION_INIT \
  { sizeof(starling_compression_t), STARLING_COMPRESS_NONE, 0, 0.0, 0, 0, 1.0 }

/* allreduce with compression; op STARLING_SUM or STARLING_AVERAGE. Each rank
 * compresses its in (plus its residual with error feedback); the compressed tensors
 * are gathered by every rank, which decompresses them and sums them in float64 in rank
 * order, so every rank gets bit-identical results: out = op over ranks of
 * decompress(compress(in_r (+ residual_r))). Not fused with other operations. A NULL
 * compression, or NONE, is starling_allreduce. Collective. BORROWS in, out, compression.
 * Errors: as allreduce; MISMATCH also when ranks compress differently. */
STARLING_API starling_status_t starling_allreduce_compressed(starling_context_t ctx, const DLTensor* in,
                                                             DLTensor* out, starling_reduce_op_t op,
                                                             const char* name,
                                                             const starling_compression_t* compression);
STARLING_API starling_status_t starling_allreduce_compressed_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, starling_reduce_op_t op, const char* name,
    const starling_compression_t* compression, starling_request_t* req);

/* CHOCO-gossip neighbor averaging (Koloskova et al., 2019), static mode only. Each
 * rank keeps public copies x_hat of itself and of its in-neighbors (per args->name,
 * starting at 0). Each call: q = C(in - x_hat_self) goes to the out-neighbors; every
 * rank adds the decompressed q's to the copies (x_hat_self += q, x_hat_j += q_j); then
 * out = in + gamma * sum_j w_j * (x_hat_j - x_hat_self), where w_j are the weights
 * neighbor_allreduce would use for the in-neighbors (args->self_weight is not used:
 * the self weight is implicitly 1 - sum_j w_j). With doubly stochastic weights the
 * average over ranks is preserved and repeated calls reach exact consensus. The copies
 * need every step's q from every in-neighbor: dynamic mode is UNSUPPORTED, and a
 * changed topology needs starling_compression_reset on every rank. A NULL compression,
 * or NONE, is starling_neighbor_allreduce. Collective. Errors: as neighbor_allreduce;
 * MISMATCH when a neighbor compresses differently. */
STARLING_API starling_status_t starling_neighbor_allreduce_compressed(starling_context_t ctx, const DLTensor* in,
                                                                      DLTensor* out,
                                                                      const starling_neighbor_args_t* args,
                                                                      const starling_compression_t* compression);
STARLING_API starling_status_t starling_neighbor_allreduce_compressed_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args,
    const starling_compression_t* compression, starling_request_t* req);

/* Drops the compression state (error-feedback residual, random-k step, CHOCO copies)
 * kept under `name`, or every name when name is NULL. Local: call it on every rank
 * alike. Waits for queued operations to finish first. Errors: INVALID_HANDLE. */
STARLING_API starling_status_t starling_compression_reset(starling_context_t ctx, const char* name);

/* ---------------------------------------------------------------------------------
 * One-sided windows: a rank writes into (or reads from) its neighbors' memory and
 * moves on; the target's progress thread applies the data while the target's own
 * thread computes and calls nothing.
 *
 * A window is created collectively over a tensor under a name. Each rank then keeps
 * one buffer per in-neighbor of the context's topology (the topology cannot change
 * while windows exist). put / accumulate send this rank's tensor into the buffers its
 * out-neighbors keep for it; get fetches in-neighbors' window tensors into the local
 * buffers; update combines the window tensor with the buffers. Each buffer has a
 * version counter (puts and gets arrived since the last update) and, when associated
 * p is enabled on the context (push-sum), a scalar p that travels with the data.
 *
 * Guarantees: when a put, accumulate or get returns (or its request completes), the
 * data is in the destination buffer and its version is counted. Buffer writes and
 * updates are atomic with respect to each other (an update never sees a half-written
 * buffer). The window BORROWS its tensor until it is freed: update writes it and
 * remote gets read it.
 *
 * Ordering (happens-before): window_create returns on any rank only after every rank
 * has registered the window, so a put, accumulate, get or mutex call issued right
 * after window_create returns (on any rank, to any peer) is served; it never meets
 * a peer that has not created the window yet. window_free returns on any rank only
 * after every rank has entered window_free, so every rank's earlier operations on the
 * window have completed. NOT_FOUND from a peer therefore means the window was freed
 * there (or ranks created windows in different orders). Requests are served by a
 * service that never blocks, so ranks may put into, accumulate into and get from each
 * other at the same time, also while their peers run collectives. Destroying a context
 * with windows alive waits for every rank to reach destroy (serving their last
 * requests meanwhile) unless the context already failed. */

/* Creates window `name` over `tensor`; buffers start as copies of the tensor, or
 * zeros with zero_init = 1. Collective: every rank passes the same name, dtype and
 * shape. PRODUCES *out (the handle is also found by starling_window_lookup).
 * Errors: INVALID_ARGUMENT, ALREADY_EXISTS (name taken), MISMATCH (ranks disagree). */
STARLING_API starling_status_t starling_window_create(starling_context_t ctx, DLTensor* tensor,
                                                      const char* name, int zero_init,
                                                      starling_window_t* out);
/* Frees the window after every rank's earlier operations on it finished. Collective.
 * The handle is invalid afterwards. After starling_context_abort or a peer failure it
 * is local: the handle is released and SUCCESS returned (the memory goes with the
 * context's destroy). */
STARLING_API starling_status_t starling_window_free(starling_window_t win);
/* The handle of the window called `name`. Errors: NOT_FOUND. */
STARLING_API starling_status_t starling_window_lookup(starling_context_t ctx, const char* name,
                                                      starling_window_t* out);
/* The names of the context's windows, sorted, separated by '\n', NUL-terminated.
 * *length = the text's length without the NUL; buffer may be NULL when capacity is 0;
 * a capacity below *length + 1 is INVALID_ARGUMENT. */
STARLING_API starling_status_t starling_window_names(starling_context_t ctx, char* buffer,
                                                     size_t capacity, size_t* length);

/* Options of put, accumulate and get: initialize with STARLING_WINDOW_ARGS_INIT. */
typedef struct starling_window_args {
  size_t struct_size;   /* sizeof(starling_window_args_t) */
  /* put / accumulate: destinations (default: every out-neighbor); get: sources
   * (default: every in-neighbor). weights (NULL: 1.0 each) scale what lands in the
   * buffer. Ranks must be out-neighbors (put, accumulate) or in-neighbors (get). */
  int num_ranks;
  const int* ranks;
  const double* weights;
  /* put / accumulate: afterwards this rank's tensor (and p) is multiplied by
   * self_weight (BlueFog's semantics; 1.0 leaves it alone). */
  double self_weight;
  /* Hold the target's mutex for this rank while writing (see mutex_acquire). */
  int require_mutex;
} starling_window_args_t;

#define STARLING_WINDOW_ARGS_INIT { sizeof(starling_window_args_t), 0, NULL, NULL, 1.0, 0 }

/* Sends `tensor` (same dtype and shape as the window's) to the destinations' buffers
 * for this rank, overwriting them and counting a version. args may be NULL. */
STARLING_API starling_status_t starling_window_put(starling_window_t win, DLTensor* tensor,
                                                   const starling_window_args_t* args);
STARLING_API starling_status_t starling_window_put_nonblocking(starling_window_t win,
                                                               DLTensor* tensor,
                                                               const starling_window_args_t* args,
                                                               starling_request_t* req);
/* As put, but adds into the destination buffers (no version is counted, as BlueFog). */
STARLING_API starling_status_t starling_window_accumulate(starling_window_t win, DLTensor* tensor,
                                                          const starling_window_args_t* args);
STARLING_API starling_status_t starling_window_accumulate_nonblocking(
    starling_window_t win, DLTensor* tensor, const starling_window_args_t* args,
    starling_request_t* req);
/* Fetches each source's window tensor into this rank's buffer for it (scaled by its
 * weight) and counts a version. self_weight is ignored. */
STARLING_API starling_status_t starling_window_get(starling_window_t win,
                                                   const starling_window_args_t* args);
STARLING_API starling_status_t starling_window_get_nonblocking(starling_window_t win,
                                                               const starling_window_args_t* args,
                                                               starling_request_t* req);

/* Options of update and update_then_collect: initialize with
 * STARLING_WINDOW_UPDATE_ARGS_INIT. */
typedef struct starling_window_update_args {
  size_t struct_size;   /* sizeof(starling_window_update_args_t) */
  /* 0: the topology's weights if it is weighted, else the uniform average over the
   * tensor and every in-neighbor buffer. 1: self_weight and the listed in-neighbors
   * (others are left out). */
  int use_weights;
  double self_weight;
  int num_ranks;
  const int* ranks;
  const double* weights;
  int reset;            /* zero the buffers used (and their p) afterwards */
  int require_mutex;    /* hold this rank's mutexes for those buffers meanwhile */
} starling_window_update_args_t;

#define STARLING_WINDOW_UPDATE_ARGS_INIT \
  { sizeof(starling_window_update_args_t), 0, 0.0, 0, NULL, NULL, 0, 0 }

/* tensor = self_weight * tensor + sum_r w_r * buffer_r, in place on the window's
 * tensor; versions are reset to 0. Local: no communication, runs on the calling
 * thread. args may be NULL. With require_mutex it waits for remote holders of the
 * mutexes like mutex_acquire. Fails with the context's error (ABORTED, PEER_FAILED,
 * TRANSPORT after a timeout) once the context is aborted or failed. */
STARLING_API starling_status_t starling_window_update(starling_window_t win,
                                                      const starling_window_update_args_t* args);
/* tensor += sum of every in-neighbor buffer, then those buffers are zeroed (push-sum's
 * collect step). Local; fails like update on an aborted or failed context. */
STARLING_API starling_status_t starling_window_update_then_collect(starling_window_t win,
                                                                   int require_mutex);
/* Per in-neighbor, ascending: the number of puts and gets that arrived since the last
 * update (list convention above). Local. */
STARLING_API starling_status_t starling_window_versions(starling_window_t win, int* ranks,
                                                        int64_t* versions, int capacity,
                                                        int* count);
/* Distributed mutexes, one per (owner rank, neighbor rank) per window: the owner's
 * buffer for that neighbor. for_self = 0: acquire, on each listed rank (default: every
 * out-neighbor), the mutex guarding its buffer for this rank. for_self = 1: this
 * rank's own mutexes for the listed ranks (default: every in-neighbor). Blocks until
 * granted. Release with the same arguments. A wait for a mutex held by another rank
 * warns when it stalls and fails with TIMEOUT (STARLING_TIMEOUT_SECONDS), PEER_FAILED
 * (the holder is gone) or ABORTED, like any other wait for peers. */
STARLING_API starling_status_t starling_window_mutex_acquire(starling_window_t win,
                                                             const int* ranks, int count,
                                                             int for_self);
STARLING_API starling_status_t starling_window_mutex_release(starling_window_t win,
                                                             const int* ranks, int count,
                                                             int for_self);

/* Associated p (push-sum): when enabled on the context, put/accumulate carry
 * p * weight into the destination's p for this rank, self_weight scales p, and
 * update combines p with the same weights. p starts at 1.0. */
STARLING_API starling_status_t starling_set_window_associated_p_enabled(starling_context_t ctx,
                                                                        int enabled);
STARLING_API starling_status_t starling_window_associated_p(starling_window_t win, double* out);
STARLING_API starling_status_t starling_window_set_associated_p(starling_window_t win, double p);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* STARLING_STARLING_H_ */
