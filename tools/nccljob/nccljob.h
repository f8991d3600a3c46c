/* SPDX-License-Identifier: MIT */
/*
 * nccljob.h - simfabric-nccljob, an NCCL job program that bootstraps without
 * MPI (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), sweeps collectives over
 * sizes, checks every result exactly and ends every rank within a bound.
 *
 * Files, and what each may include:
 *   main.c           the job's flow
 *   job.c            the clock, failure records, the verbose log (used by all)
 *   wait.c           the polling loop between NCCL calls, and the watchdog
 *   opts.c           the command line, the environment, the steps
 *   oob.c            the TCP star to rank 0: bootstrap, barriers, results, aborts
 *   data.c           data types, the input pattern, expected values, checks
 *   report.c         the JSON file and the human table
 *   dev.c            everything CUDA and NCCL (the only file with their headers)
 * Only dev.c needs CUDA; the rest is plain C, so --dry-run exercises
 * all of it (bootstrap, verification, failure handling) on a CPU-only machine.
 */
#ifndef SIMFABRIC_NCCLJOB_H
#define SIMFABRIC_NCCLJOB_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define NJ_PROG "simfabric-nccljob"
#define NJ_ID_BYTES 128         /* NCCL_UNIQUE_ID_BYTES; asserted in dev.c         */
#define NJ_FINAL_GRACE_S 15.0   /* how long the final reports may take after a failure */
#define NJ_ABORT_BOUND_S 20.0   /* how long ncclCommAbort may take before the watchdog */
#define NJ_STEP_GRACE_S 10.0    /* how much longer than --op-timeout-s a peer may report late */
#define NJ_SLOW_US 20000         /* --inject R:slow: how late rank R starts one iteration */
#define NJ_HICCUP_US 2000        /* --inject R:noisy: how late it starts every NJ_HICCUP_EVERY */
#define NJ_HICCUP_EVERY 7
#define NJ_BIG_HICCUP_US 8000    /* ...but the first, a rare big one: an episode of its own */
#define NJ_STALL_US 5000.0      /* an iteration this much over the median holds a stall (a
                                   fault's retry, a flap, a straggler) */
#define NJ_STALL_EDGE_US 1000.0 /* ...and its neighbours this much over it, the part of the stall
                                   that fell into them; scattered ones are the host's hiccups */
#define NJ_TOP_STALLS 8          /* the largest stall episodes a result names */
#define NJ_LOSS_GRACE_S 10.0    /* --on-peer-loss shrink: how long rank 0 waits, after a failure,
                                   for a lost rank's connection to close (a killed process's
                                   closes at once; a failure with no rank gone is fatal) */
#define NJ_MAX_LOST 64          /* ranks one shrink may exclude */
#define NJ_MAX_SHRINKS 8        /* shrinks one job records */

enum nj_coll {
	NJ_ALLREDUCE,
	NJ_ALLGATHER,
	NJ_REDUCESCATTER,
	NJ_BROADCAST,
	NJ_REDUCE,
	NJ_ALLTOALL,
	NJ_SENDRECV,
	NJ_NCOLL
};

enum nj_dtype {
	NJ_INT8,
	NJ_UINT8,
	NJ_INT32,
	NJ_UINT32,
	NJ_INT64,
	NJ_UINT64,
	NJ_HALF,
	NJ_FLOAT,
	NJ_DOUBLE,
	NJ_BF16,
	NJ_NDTYPE
};

enum nj_op { NJ_SUM, NJ_PROD, NJ_MIN, NJ_MAX, NJ_NOP };

/* What happened to a rank. The exit status follows from it (nj_kind_exit). */
enum nj_kind {
	NJ_OK,        /* 0 */
	NJ_DATA,      /* 2: wrong elements; the sweep went on */
	NJ_SETUP,     /* 1: options, environment, bootstrap, CUDA set-up */
	NJ_NCCL,      /* 3: an NCCL call or NCCL's asynchronous error */
	NJ_CUDA,      /* 3: a CUDA call after set-up */
	NJ_PEER_LOST, /* 3: a rank's out-of-band connection closed before its report */
	NJ_TIMEOUT,   /* 4: a wait ran past --op-timeout-s or --timeout-s */
	NJ_ABORTED,   /* another rank failed first: its exit status */
	NJ_SIGNAL,    /* 128 + the signal */
	NJ_NKIND
};

/* A failure, as it travels between ranks. Fixed size: it is sent as is. */
struct nj_fail {
	int32_t kind;      /* enum nj_kind of the origin */
	int32_t rank;      /* where it happened */
	int32_t exit_code;
	int32_t gen;       /* the sender's shrinks so far: rank 0 drops an ERROR from before the
                              last shrink (it reported the loss that shrink handled) */
	double after_ms;   /* since that rank started */
	char code[48];     /* "ncclRemoteError", "cudaErrorNoDevice", "timeout", ... */
	char phase[96];    /* "allreduce 1048576 B: timed loop" */
	char msg[640];
};

/* ---- the out-of-band channel (oob.c) ---------------------------- */

enum nj_msg_type {
	NJM_HELLO = 1, /* peer -> 0: struct nj_hello */
	NJM_WELCOME,   /* 0 -> peer: struct nj_go (ok, or why not) */
	NJM_INFO,      /* peer -> 0: struct nj_info, after the CUDA set-up */
	NJM_GO,        /* 0 -> peer: struct nj_go with the ncclUniqueId */
	NJM_RESULT,    /* peer -> 0: struct nj_result, one per step */
	NJM_NEXT,      /* 0 -> peer: int32 step: the step barrier */
	NJM_ERROR,     /* peer -> 0, unasked: struct nj_fail */
	NJM_ABORT,     /* 0 -> peer, unasked: struct nj_fail of the origin */
	NJM_FINAL,     /* peer -> 0: struct nj_final */
	NJM_DONE,      /* 0 -> peer: struct nj_final of the whole job */
	NJM_SHRINK,    /* 0 -> peer, unasked: struct nj_shrink: carry on without the lost */
	NJM_NTYPE
};

struct nj_hello {
	uint32_t proto;
	uint32_t opt_hash;  /* the options that must match on every rank */
	int32_t rank, nranks, pid;
	char host[64];
};

struct nj_go {
	int32_t ok;
	int32_t pad;
	uint8_t id[NJ_ID_BYTES];
	struct nj_fail fail;  /* when !ok */
};

struct nj_info {
	int32_t rank, local_rank, device, pid;
	int32_t kind;         /* NJ_OK, or NJ_SETUP with fail */
	int32_t pad;
	char host[64];
	char hostid[64];      /* NCCL_HOSTID, "" if unset */
	char net[32];         /* NCCL_NET, "" if unset */
	char devname[96];
	char pci[32];
	struct nj_fail fail;
};

struct nj_result {
	int32_t step;
	int32_t checks;       /* how many times the output was checked */
	double time_us;       /* per iteration */
	double wall_us;       /* per iteration, host clock, enqueue to completion */
	/* --timing each: the slowest iteration, and the iterations that stalled (over the
	 * median + NJ_STALL_US, or + NJ_STALL_EDGE_US next to one): how many, and their time
	 * beyond the median, summed; stalls -1: not measured (out of memory) */
	double max_us;
	double stall_us;
	int32_t stalls;
	/* ...and the episodes (runs of stalled iterations back to back: one stall each): how
	 * many, and the largest excesses, largest first (a fault's windows, a straggler; a busy
	 * host's rare big hiccup is one more, and smaller, episode) */
	int32_t episodes;
	double top_us[NJ_TOP_STALLS];
	int32_t cranks;       /* the communicator's size this step ran on */
	int32_t gen;          /* the sender's shrinks so far: a RESULT from before one is stale */
	int32_t pad_;
	uint64_t wrong;       /* worst check */
	uint64_t checked;     /* elements per check */
	int64_t first;        /* index of the first wrong element, -1 if none */
	char got[48], expected[48];
};

struct nj_final {
	int32_t kind;         /* this rank's own status (NJ_ABORTED: fail is the origin's) */
	int32_t exit_code;
	struct nj_fail fail;
};

/* --on-peer-loss shrink: rank 0 tells the survivors whom to exclude and where to resume. */
struct nj_shrink {
	int32_t step;         /* the step every survivor runs again on the smaller communicator */
	int32_t nlost;
	int32_t lost[NJ_MAX_LOST]; /* the lost ranks (their RANK, not a communicator rank) */
	int32_t cranks;       /* the communicator's size after it */
	int32_t by;           /* enum nj_shrink_by */
	double after_ms;      /* when rank 0 decided, since its start */
	struct nj_fail why;   /* the failure that started it */
	uint8_t id[NJ_ID_BYTES]; /* NJ_SHRINK_REINIT: the new communicator's ncclUniqueId */
};

struct nj_conn;

struct nj_oob {
	int rank, nranks;
	int lfd;                /* rank 0's listening socket */
	struct nj_conn *conn;   /* rank 0: [nranks], [0] unused; others: [1], rank 0 */
	int have_fail;          /* the first ERROR, ABORT, SHRINK or lost connection */
	struct nj_fail fail;
	int have_shrink;        /* a peer: rank 0 sent SHRINK (have_fail is set too) */
	struct nj_shrink shrink;
	int gen;                /* shrinks so far (oob_forgive counts them) */
	double t0;
};

#define NJ_WAIT_IGNORE_FAIL 1 /* the final reports: wait even after a failure */

extern volatile sig_atomic_t nj_signal; /* set by SIGINT/SIGTERM */

double nj_now(void);
void nj_fail_set(struct nj_fail *f, int kind, int rank, double t0, const char *code,
		 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int nj_kind_exit(int kind);
void nj_fail_line(const struct nj_fail *f, char *buf, size_t n);
const char *nj_kind_status(int kind);

int oob_serve(struct nj_oob *o, const char *addr, const char *port, double deadline,
	      struct nj_hello *hellos, struct nj_fail *f);
int oob_connect(struct nj_oob *o, const char *addr, const char *port, double deadline,
		const struct nj_hello *mine, struct nj_fail *f);
int oob_send(struct nj_oob *o, int to, int type, const void *p, uint32_t len);
int oob_send_f(struct nj_oob *o, int to, int type, const void *p, uint32_t len,
	       struct nj_fail *f);
void oob_bcast(struct nj_oob *o, int type, const void *p, uint32_t len);
int oob_wait(struct nj_oob *o, int from, int type, void *p, uint32_t len, double deadline,
	     int flags, struct nj_fail *f);
int oob_check(struct nj_oob *o, struct nj_fail *f);
int oob_alive(const struct nj_oob *o, int rank);
const struct nj_fail *oob_rank_fail(const struct nj_oob *o, int rank);
void oob_close(struct nj_oob *o);
/* Rank 0: the ranks whose connection closed before they reported, not yet forgiven. */
int oob_lost(struct nj_oob *o, int32_t *lost, int max);
/* After a shrink: no failure pending; the lost ranks' connections are history. */
void oob_forgive(struct nj_oob *o);

/* ---- data types, the input pattern and the checks (data.c) ------ */

struct nj_data {
	int dtype, op, nranks;
	unsigned span_red;      /* pattern period for reducing collectives */
	unsigned span_mov;      /* pattern period for data movement */
	uint64_t table[256];    /* [k]: the reduction over ranks of pattern value k */
};

struct nj_check {
	uint64_t checked, wrong;
	int64_t first;
	char got[48], expected[48];
};

size_t nj_dtype_size(int dt);
const char *nj_dtype_name(int dt);
int nj_dtype_parse(const char *s);
const char *nj_op_name(int op);
int nj_op_parse(const char *s);
const char *nj_coll_name(int c);
int nj_coll_parse(const char *s);
int nj_coll_reduces(int c);
const char *nj_coll_bytes_def(int c);
double nj_busbw_factor(int c, int nranks);
int nj_span_warning(int dt, int op, int nranks, char *buf, size_t n);

void nj_data_init(struct nj_data *d, int dt, int op, int nranks);
void nj_fill(const struct nj_data *d, int coll, int rank, void *buf, size_t n);
void nj_verify(const struct nj_data *d, int coll, int rank, int root, size_t chunk,
	       const void *buf, size_t n, struct nj_check *c);
void nj_simulate(const struct nj_data *d, int coll, int rank, int root, size_t chunk, void *buf,
		 size_t n);
void nj_format(int dt, uint64_t bits, char *out, size_t n);
uint64_t nj_load(int dt, const void *buf, size_t i);
void nj_store(int dt, void *buf, size_t i, uint64_t bits);

/* ---- the job (main.c), shared with the reporting and device code ----- */

struct nj_opts {
	int colls[NJ_NCOLL], ncolls;
	size_t *sizes;
	int nsizes;
	int dtype, op, root;
	int warmup, iters, check;
	int each;               /* --timing each: one wait per iteration */
	int device;             /* -1: LOCAL_RANK % devices */
	double timeout_s, op_timeout_s;
	const char *json;
	int blocking;
	int nccl_mem; /* --buffers nccl: ncclMemAlloc (cuMem) instead of cudaMalloc */
	int reg;      /* --register 1: ncclCommRegister both buffers (user-buffer registration) */
	int dry;
	int on_loss;  /* --on-peer-loss: NJ_LOSS_FAIL or NJ_LOSS_SHRINK */
	int shrink_by; /* --shrink-by: NJ_SHRINK_REINIT or NJ_SHRINK_NCCL */
	int inject_rank, inject_kind, inject_step;
	int verbose;
};

enum nj_on_loss { NJ_LOSS_FAIL, NJ_LOSS_SHRINK };
/* How the survivors get their smaller communicator (rank 0 decides; the SHRINK message says). */
enum nj_shrink_by { NJ_SHRINK_REINIT, NJ_SHRINK_NCCL };

enum nj_inject {
	NJ_INJ_NONE,
	NJ_INJ_SETUP,
	NJ_INJ_EXIT,
	NJ_INJ_HANG,
	NJ_INJ_DATA,
	NJ_INJ_NCCL,
	NJ_INJ_STUCK,
	NJ_INJ_FLIP, /* one element of the first warm-up iteration's output, once */
	NJ_INJ_SLOW, /* the middle timed iteration starts NJ_SLOW_US late on that rank */
	NJ_INJ_NOISY, /* that, and every NJ_HICCUP_EVERY-th NJ_HICCUP_US late: a busy host */
	NJ_NINJ
};

struct nj_step {
	int coll;
	size_t req;     /* the size asked for (--sizes): bytes is it, rounded for the ranks */
	size_t bytes;   /* as nccl-tests counts them (nj_coll_bytes_def) */
	size_t count;   /* bytes / element size */
	size_t chunk;   /* the count passed to NCCL: count / nranks for allgather,
			 * reducescatter and alltoall, else count */
	size_t in_n, out_n;
};

struct nj_rankrec {
	struct nj_info info;
	int have_info;
	struct nj_final final;
	int have_final;
};

struct nj_dev;

struct nj_job {
	struct nj_opts o;
	int rank, nranks, local_rank;
	const char *addr, *port;
	double t0, deadline;
	struct nj_oob oob;
	/* the communicator: after a shrink (--on-peer-loss shrink) smaller than the job */
	int crank, cranks;
	int *cmap;              /* [nranks]: each rank's communicator rank, -1 once lost */
	struct nj_shrink shrinks[NJ_MAX_SHRINKS];
	int nshrinks;
	struct nj_data data;
	struct nj_step *steps;
	int nsteps;
	int steps_done;
	char skipped[160];      /* the sizes too small for one element (per rank) */
	struct nj_result *res;  /* rank 0: [nsteps][nranks]; others: [nsteps][1] */
	struct nj_info me;
	struct nj_rankrec *ranks; /* rank 0 only */
	struct nj_fail fail;    /* the first failure this rank saw (its own or a peer's) */
	int failed;
	int data_errors;
	struct nj_final job;    /* rank 0: the whole job's status, once known */
	int nccl_version, cuda_runtime, cuda_driver;
	char phase[96];
	size_t cap;             /* bytes in each of the four buffers */
	void *h_send, *h_recv;  /* pinned host memory (plain in --dry-run) */
	struct nj_dev *dev;
};

int opts_parse(struct nj_job *j, int argc, char **argv);
int opts_env(struct nj_job *j);
int opts_steps(struct nj_job *j);
/* Each step's counts for a communicator of n ranks (after a shrink); the list stays. */
void opts_geometry(struct nj_job *j, int n);
uint32_t opts_hash(const struct nj_job *j);

int job_wait(struct nj_job *j, const char *what, double timeout_s,
	     int (*poll)(struct nj_job *, struct nj_fail *), struct nj_fail *f);
void job_failf(struct nj_job *j, struct nj_fail *f, int kind, const char *code, const char *fmt,
	       ...) __attribute__((format(printf, 5, 6)));
void wd_arm(double seconds, const char *what);
/* Start the watchdog thread for job j (wait.c). 0, or -1. */
int wd_start(struct nj_job *j);
void wd_disarm(void);
struct nj_final job_own_final(const struct nj_job *j);
void nj_say(const struct nj_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int report_json(const struct nj_job *j, const char *path);
void report_header(const struct nj_job *j);
void report_row(const struct nj_job *j, int step);
void report_summary(const struct nj_job *j);
void report_combine(const struct nj_job *j, int step, double *time_us, double *wall_us,
		    uint64_t *wrong, int *wrong_rank);

/* ---- CUDA and NCCL (dev.c) -------------------------------------- */

void dev_versions(struct nj_job *j);
int dev_setup(struct nj_job *j, struct nj_fail *f);
int dev_unique_id(struct nj_job *j, uint8_t id[NJ_ID_BYTES], struct nj_fail *f);
int dev_comm_init(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f);
int dev_upload(struct nj_job *j, size_t bytes, struct nj_fail *f);
int dev_poison(struct nj_job *j, size_t bytes, struct nj_fail *f);
/* --inject R:slow and R:noisy on rank R's timed loop. */
struct nj_late {
	int slow_at; /* this iteration starts NJ_SLOW_US late (the middle one), or -1 */
	int noisy;   /* and every NJ_HICCUP_EVERY-th NJ_HICCUP_US late (the first
			NJ_BIG_HICCUP_US), none next to slow_at */
};

/* How late iteration i starts, in microseconds. */
static inline unsigned nj_late_us(const struct nj_late *l, int i)
{
	if (!l || i < 0)
		return 0;
	if (i == l->slow_at)
		return NJ_SLOW_US;
	if (l->noisy && i % NJ_HICCUP_EVERY == 3 && (i < l->slow_at - 1 || i > l->slow_at + 1))
		return i == 3 ? NJ_BIG_HICCUP_US : NJ_HICCUP_US;
	return 0;
}

/* late: how late each iteration starts on this rank (--inject R:slow, R:noisy), or NULL;
 * each_us (with each, or NULL): every iteration's own time, iters of them. */
int dev_run(struct nj_job *j, const struct nj_step *s, int iters, int each,
	    const struct nj_late *late, double *gpu_us, double *each_us, struct nj_fail *f);
/* The stall figures of n iteration times, in their order: see struct nj_result. */
void nj_stalls(const double *us, int n, struct nj_result *r);
int dev_download(struct nj_job *j, size_t bytes, struct nj_fail *f);
/* Flip the low bits of element i of the output on the GPU (--inject R:flip). */
int dev_flip(struct nj_job *j, size_t i, struct nj_fail *f);
void dev_abort(struct nj_job *j);
/* ncclCommShrink without the excluded communicator ranks; the old communicator aborted. */
int dev_shrink(struct nj_job *j, int *excl, int nexcl, struct nj_fail *f);
/* --shrink-by reinit: abort the communicator, then join the survivors' new one (id) as rank
 * j->crank of j->cranks. */
int dev_reinit(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f);
int dev_finalize(struct nj_job *j, struct nj_fail *f);

#endif
