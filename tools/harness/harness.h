/* SPDX-License-Identifier: MIT */
/*
 * harness.h - simfabric-harness: drive any NCCL net plugin the way NCCL's
 * proxy does, on CPUs only, with one process per emulated node.
 *
 * Modules and their prefixes:
 *   main.c           hx_   command line, the parent (fork, relay, timeouts), results
 *   state.c          hx_   the process-wide state: options, world, shared page, flows
 *   util.c           hx_   clocks, failures, data patterns, /proc counters
 *   plugin_abi.c     pl_   dlopen, the ncclNet v8..v12 adapter, the logger
 *   oob.c            oob_  the out-of-band channel between parent and ranks
 *   json.c           js_   a small JSON writer
 *   engine.c         eng_  requests, NCCL-like progress, connection setup
 *   tests.c          t_    the non-destructive tests
 *   destructive.c    t_    the destructive tests (truncate, peer_death, daemon_death)
 *   bench.c          t_    --bench
 *   flows.c          t_    flows: given rank pairs stream at once (--flows)
 *   launched.c       lx_   --launched: one rank per process, out-of-band over TCP
 *
 * The parent never loads the plugin: it only forks the ranks and relays
 * their out-of-band messages, so a crashing plugin can only take one rank down.
 */
#ifndef SF_HARNESS_H
#define SF_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "plugin/ncclnet.h"

#define HX_MAX_RANKS 64
#define HX_MAX_DEVS 16
#define HX_MAX_RECVS 64 /* length of the sizes[] array NCCL hands to test (NCCL_PROXY_MAX_SUBS) */
#define HX_MAX_THREADS 64
#define HX_DETAIL_LEN 1024
#define HX_WARN_KEEP 16 /* last WARN texts kept per rank */

/* ---- options (parsed by the parent, inherited by the ranks through fork) ---- */

#define HX_FLOW_WINDOW_MAX 8 /* a flow's messages in flight at most: NCCL_STEPS, the default */

struct hx_opts {
	const char *plugin;
	int nranks;
	const char *json;
	double timeout; /* per test, seconds */
	double bound;	/* failure-detection bound for peer_death / close_inflight */
	int threads;
	size_t max_bytes;
	const char *node_prefix;
	int api_version; /* 0: newest found */
	int bench;
	int verbose;
	uint64_t comm_id; /* the same on every rank, like comm->commHash */
	const char *flows; /* --flows SPEC as given (NULL: the ring) */
	size_t flow_bytes; /* per flow */
	size_t flow_msg;   /* message size of the flows */
	int flow_window;   /* messages in flight per flow (1..HX_FLOW_WINDOW_MAX) */
	int corrupt_ok;	   /* flows: wrong data is counted in the metrics, not a failure */
	long fault_msgs;    /* faults: messages each rank sends to the next */
	size_t fault_bytes; /* faults: their size */
	double fault_gap;   /* faults: seconds between a rank's posts */
	int fault_expect;   /* faults: HX_FE_OK, HX_FE_ERROR or HX_FE_EITHER */
	int fault_lose;	    /* faults: the rank lost on purpose (its death is its result), -1 */
	int profiler;	    /* --profiler: profiler handles on isend/irecv, events checked */
	int launched;	    /* --launched: this process is one rank (launched.c) */
};
enum { HX_FE_OK = 0, HX_FE_ERROR, HX_FE_EITHER };
extern struct hx_opts hx_opt;

/* The flows of --flows, parsed by the parent: phases run one after another, the flows of a
 * phase all at once. */
#define HX_MAX_FLOWS 256
struct hx_flow {
	int phase, src, dst;
};
extern struct hx_flow hx_flows[HX_MAX_FLOWS];
extern int hx_nflows, hx_nphases;

/* ---- the command line (opts.c) ---- */

/* The options into hx_opt; the --tests list into *tests (NULL: none given). Exits on a bad
 * one. */
void hx_parse_args(int argc, char **argv, const char **tests);
/* The tests to run, in order, from the --tests list (NULL: the default set):
 * hx_sched[hx_nsched]. */
void hx_build_schedule(const char *list);
extern int hx_sched[64], hx_nsched;
extern int hx_nranks_set; /* --nranks was given */
/* --flows into hx_flows for nranks ranks. Exits on a bad one. */
void hx_parse_flows(const char *spec, int nranks);
/* "simfabric-harness: <message> (see --help)" on stderr, then exit status 2. */
void hx_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- what every rank knows about every other (gathered by the load step) ---- */

struct hx_devinfo {
	int max_recvs;
	uint64_t max_p2p; /* v8 has no field: 1 GiB, what NCCL's shim assumes */
};

struct hx_world {
	int rank, nranks;
	int ndev[HX_MAX_RANKS];
	struct hx_devinfo dev[HX_MAX_RANKS][HX_MAX_DEVS];
};
extern struct hx_world hx_w;

/* Shared page mapped by the parent before fork: the bench's shared-memory floor. */
struct hx_shared {
	_Alignas(64) volatile uint64_t line;
	_Alignas(64) volatile uint64_t spare;
};
extern struct hx_shared *hx_shm;

/* ---- one test run on one rank ---------------------------------------------- */

struct js;
struct eng;
struct eng_conn;
struct eng_links;

struct hx_test {
	const struct hx_test_def *def;
	double t0, deadline;
	pthread_mutex_t lock;
	int nfail;
	int aborted; /* failed because another rank failed */
	char detail[HX_DETAIL_LEN];
	char note[HX_DETAIL_LEN]; /* shown as detail when the test passed */
	struct js *metrics;
	int warn_mark; /* WARN count when the test started */
};

enum {
	HX_T_DESTRUCTIVE = 0x1, /* never in "all" */
	HX_T_TERMINAL = 0x2,	/* leaves the fabric or a rank unusable: runs last, alone */
	HX_T_INTERNAL = 0x4,	/* load/unload: always run, not selectable */
	HX_T_BENCH = 0x8,
	HX_T_NAMED = 0x10,	/* runs only when named (or implied by its option), never in "all" */
};

struct hx_test_def {
	const char *name;
	void (*fn)(struct hx_test *t);
	int flags;
	const char *desc;
};
extern const struct hx_test_def hx_tests[];
extern const int hx_ntests;

/* Record a failure: the first one becomes the detail, later ones are counted. Thread-safe. */
void hx_fail(struct hx_test *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note for a passing test ("skipped: maxRecvs=1"); appended with "; ". */
void hx_note(struct hx_test *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hx_failed(struct hx_test *t);

/* ---- util ------------------------------------------------------------------------ */

/* CLOCK_MONOTONIC seconds (one clock for every process). Inline: oob.c and util.c both need
 * it, and util.c calls oob.c, so it lives below both. */
static inline double hx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
void hx_sleep(double s);
const char *hx_rc_str(int rc); /* "ncclRemoteError(6)", also the engine's own codes */
void *hx_alloc(size_t n);      /* page aligned, never NULL (exits the rank if out of memory) */
void hx_free(void *p);	       /* NULL-safe */
void hx_free_all(void);	       /* what the test left: its comms are closed by then */
uint64_t hx_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
void hx_fill(void *buf, size_t len, uint64_t seed);
/* Offset of the first byte that differs from the pattern, or SIZE_MAX. */
size_t hx_check(const void *buf, size_t len, uint64_t seed, uint8_t *want, uint8_t *got);
uint8_t hx_pattern_byte(uint64_t seed, size_t off);
#define HX_POISON_BYTE 0xEE
/* Offset of the first byte in [from, to) that is not HX_POISON_BYTE, or SIZE_MAX. */
size_t hx_check_poison(const void *buf, size_t from, size_t to);
int hx_count_fds(void);
int hx_count_threads(void);
int hx_maps_contain(const char *path);
size_t hx_fmt_bytes(char *out, size_t cap, size_t n); /* "64 KiB" */
int hx_ring_next(void);
int hx_ring_prev(void);
void hx_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
void hx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* -v only */

/* ---- the tests (tests.c, destructive.c, bench.c) ------------------ */

extern int hx_base_threads; /* threads of a rank before it loaded anything */

/* Helpers the test files share (testlib.c, but t_size_list: tests.c). */
enum { T_SEED_CONNECT = 1, T_SEED_SIZES, T_SEED_TAGS, T_SEED_INFLIGHT, T_SEED_A2A, T_SEED_CLOSE,
       T_SEED_REUSE, T_SEED_THREADS, T_SEED_RELOAD, T_SEED_MR, T_SEED_FAULT, T_SEED_BENCH,
       T_SEED_FLOWS, T_SEED_FAULTS };
/* Ring links on device 0: this rank sends to next and receives from prev. */
int t_ring_open(struct eng *e, struct eng_links *ls);
struct eng_conn *t_ring_send(struct eng_links *ls);
struct eng_conn *t_ring_recv(struct eng_links *ls);
/* Receive check: reported size, every byte, and nothing written past the message. */
int t_check(struct hx_test *t, const char *what, const void *buf, size_t size, size_t cap,
	    uint64_t seed, int reported, int reported_known);
/* One message each way at once: `size` bytes out on sc (pattern sseed, tag stag), into a
 * `cap` buffer from rc (pattern rseed, tag rtag). Either conn may be NULL. 0 or -1. */
int t_xfer(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, size_t size, size_t cap,
	   uint64_t sseed, uint64_t rseed, int stag, int rtag);
/* An out-of-band barrier; if the test was aborted, records why (which rank failed). */
int t_barrier(struct hx_test *t);
/* Records "aborted: rank R failed" for a collective that came back aborted. */
void t_aborted(struct hx_test *t, const char *during);
/* Finalize, wait for helper threads to go, dlclose; reports what it finds. 0 or -1. */
int t_unload_plugin(struct hx_test *t);
/* A single receive, no retry: 0 posted, 1 would block, -1 failed. */
struct eng_op;
int t_irecv1(struct eng_conn *c, void *buf, size_t cap, int tag, void *mh, struct eng_op *op);
/* Registration sizes: NCCL never registers 0 bytes; our buffers are whole pages. */
size_t t_reglen(size_t n);
/* The sizes the sizes test sends (up to cap of them): how many. */
int t_size_list(size_t *out, int cap);

void t_load(struct hx_test *t);
void t_unload(struct hx_test *t);
void t_connect(struct hx_test *t);
void t_props(struct hx_test *t);
void t_sizes(struct hx_test *t);
void t_tags(struct hx_test *t);
void t_inflight(struct hx_test *t);
void t_allreduce(struct hx_test *t);
void t_alltoall(struct hx_test *t);
void t_close_inflight(struct hx_test *t);
void t_listen_reuse(struct hx_test *t);
void t_threads(struct hx_test *t);
void t_reload(struct hx_test *t);
void t_mr(struct hx_test *t);
void t_truncate(struct hx_test *t);
void t_peer_death(struct hx_test *t);
void t_daemon_death(struct hx_test *t);
void t_bench(struct hx_test *t);
void t_flows(struct hx_test *t);
void t_faults(struct hx_test *t);
void t_landing(struct hx_test *t);

/* ---- plugin adapter (plugin_abi.c) --------------------------------------------- */

/* Properties of any version, widened. `has` says which fields the version has, `unset`
 * which of those getProperties left as they were (NCCL does not zero the struct). */
enum {
	PL_F_NAME = 1u << 0, PL_F_PCIPATH = 1u << 1, PL_F_GUID = 1u << 2, PL_F_PTRSUPPORT = 1u << 3,
	PL_F_REGISGLOBAL = 1u << 4, PL_F_FORCEFLUSH = 1u << 5, PL_F_SPEED = 1u << 6,
	PL_F_PORT = 1u << 7, PL_F_LATENCY = 1u << 8, PL_F_MAXCOMMS = 1u << 9,
	PL_F_MAXRECVS = 1u << 10, PL_F_DEVTYPE = 1u << 11, PL_F_DEVVERSION = 1u << 12,
	PL_F_VPROPS = 1u << 13, PL_F_MAXP2P = 1u << 14, PL_F_MAXCOLL = 1u << 15,
	PL_F_MAXMULTI = 1u << 16, PL_F_RAIL = 1u << 17, PL_F_PLANE = 1u << 18,
};
#define PL_NFIELDS 19

struct pl_props {
	const char *name, *pci_path;
	uint64_t guid;
	int ptr_support, reg_is_global, force_flush, speed, port;
	float latency;
	int max_comms, max_recvs, dev_type, dev_version;
	int vndevs, vdevs[NCCL_NET_MAX_DEVS_PER_NIC_V12], vmax;
	uint64_t max_p2p, max_coll;
	int max_multi, rail_id, plane_id;
	unsigned has, unset;
};
const char *pl_field_name(unsigned flag);

struct pl_state {
	void *dl;
	int version; /* 8..12 */
	const char *name;
	const void *tab;
	void *ctx; /* v11+ */
	int inited; /* init called and not finalized (NCCL 2.28.9 finalizes failed inits too) */
	ncclNetCommConfig_t config;
	char path[4096];
	unsigned long prof_calls;
};
extern struct pl_state pl;

/* --profiler: the plugin's events as a profiler saw them, over reloads too (its lock) */
struct pl_prof_stats {
	unsigned long starts, stops, bad, sf, send_bytes;
	char first_bad[256];
};
extern struct pl_prof_stats plp;
long pl_prof_live(void); /* --profiler: events started and never stopped */

/* dlopen + probe v12..v8 (or only `force`). 0, or -1 with a reason in err. */
int pl_load(const char *path, int force, char *err, size_t errlen);
void pl_unload(void);
ncclResult_t pl_init(void);
ncclResult_t pl_finalize(void);
int pl_has_finalize(void);
ncclResult_t pl_devices(int *ndev);
ncclResult_t pl_get_props(int dev, struct pl_props *p);
ncclResult_t pl_listen(int dev, void *handle, void **lcomm);
ncclResult_t pl_connect(int dev, void *handle, void **scomm, ncclNetDeviceHandle_t **dcomm);
ncclResult_t pl_accept(void *lcomm, void **rcomm, ncclNetDeviceHandle_t **dcomm);
ncclResult_t pl_reg_mr(void *comm, void *data, size_t size, int type, void **mh);
int pl_has_dmabuf(void);
ncclResult_t pl_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t off, int fd,
			      void **mh);
ncclResult_t pl_dereg_mr(void *comm, void *mh);
ncclResult_t pl_isend(void *scomm, void *data, size_t size, int tag, void *mh, void **req);
ncclResult_t pl_irecv(void *rcomm, int n, void **data, size_t *sizes, int *tags, void **mh,
		      void **req);
ncclResult_t pl_test(void *req, int *done, int *sizes);
int pl_has_irecv_consumed(void);
ncclResult_t pl_irecv_consumed(void *rcomm, int n, void *req);
ncclResult_t pl_set_net_attr(void);
ncclResult_t pl_close_send(void *c);
ncclResult_t pl_close_recv(void *c);
ncclResult_t pl_close_listen(void *c);

/* The logger handed to init: NCCL_DEBUG / NCCL_DEBUG_SUBSYS like NCCL, WARNs counted. */
void pl_log_setup(int rank);
int pl_warn_count(void);
/* 1 if a WARN after number `since` contains every non-NULL needle; copies it to out. */
int pl_warn_find(int since, const char *n1, const char *n2, char *out, size_t cap);
void pl_warn_last(char *out, size_t cap);

/* ---- out-of-band channel (oob.c) --------------------------------------- */

enum oob_type {
	OOB_HELLO = 1,	/* C->P: "version\0name\0" */
	OOB_GATHER = 2, /* C->P: arg = test, own contribution */
	OOB_RESULT = 3, /* C->P: struct oob_result + detail + metrics */
	OOB_NOTE = 4,	/* C->P: arg = OOB_NOTE_* */
	OOB_GATHER_REPLY = 0x81,
	OOB_ABORT = 0x82, /* arg = the rank that failed */
	OOB_RUN = 0x83,	  /* arg = test index to run next */
	OOB_QUIT = 0x84,
};
/* EXITING: this rank is about to _exit(0) by design (peer_death): a launched rank is not the
 * parent's child, and its connection's EOF alone cannot tell that from a crash. */
enum { OOB_NOTE_READY = 1, OOB_NOTE_FAILED = 2, OOB_NOTE_EXITING = 3 };

struct oob_hdr {
	uint32_t type, arg;
	uint64_t len;
};

struct oob_result {
	int32_t test, ok, aborted, pad;
	double seconds;
	uint32_t detail_len, metrics_len;
};

#define OOB_MAX_MSG (256u << 20)

/* Rank side. */
void oob_child_init(int fd);
/* In a process forked from a rank: drop the rank's OOB socket (it is not that rank). */
void oob_child_detach(void);
int oob_send(uint32_t type, uint32_t arg, const void *data, size_t len);
/* Like oob_send, but gives up instead of waiting for another thread's exchange. */
int oob_try_send(uint32_t type, uint32_t arg, const void *data, size_t len);
/* buf holds nranks * len bytes; this rank's part is at rank * len. 0, or -1 if aborted. */
int oob_allgather(void *buf, size_t len);
int oob_barrier(void);
/* Non-blocking: has the parent said another rank failed this test? Returns that rank + 1. */
int oob_aborted(void);
void oob_set_test(int idx);
/* Waits for the parent's next command: a test index, or -1 for quit / parent gone. */
int oob_next_command(void);

/* Parent side: a reader that assembles messages from a non-blocking fd. */
struct oob_peer {
	int fd;
	char *buf;
	size_t len, cap;
};
int oob_peer_read(struct oob_peer *p); /* 0 ok, 1 eof, -1 error */
/* 1 and a message (data points into the peer's buffer until the next call), or 0. */
int oob_peer_next(struct oob_peer *p, struct oob_hdr *h, char **data);
int oob_write(int fd, uint32_t type, uint32_t arg, const void *data, size_t len);

/* ---- --launched (launched.c) ------------------------------------------ */

/* The rank, the world size and rank 0's address from the launcher's environment (RANK and
 * WORLD_SIZE, or OMPI_COMM_WORLD_*, or SLURM_PROCID/SLURM_NTASKS; MASTER_ADDR, MASTER_PORT).
 * A missing or malformed one exits 2 with one line naming the variable. argv: the command line,
 * which every rank must share. */
int lx_env(int argc, char **argv, int *rank, int *nranks);
/* Joins the run. 0 in a rank's process: fds[0] is its channel to rank 0's harness and
 * hx_opt.comm_id is the run's. 1 in rank 0's serving process: fds[r] for every rank, *pid0 its
 * forked rank 0. -1 on failure, said on stderr. */
int lx_start(int rank, int nranks, int *fds, pid_t *pid0);

/* ---- JSON writer (json.c) -------------------------------------------- */

struct js {
	char *buf;
	size_t len, cap;
	int depth;
	unsigned char first[32];
	char close[32]; /* the bracket that ends each open level */
};
void js_init(struct js *j);
void js_free(struct js *j);
void js_obj(struct js *j, const char *key); /* key NULL inside arrays / at top */
void js_end_obj(struct js *j);
void js_arr(struct js *j, const char *key);
void js_end_arr(struct js *j);
void js_end_all(struct js *j); /* closes whatever is still open */
void js_str(struct js *j, const char *key, const char *s);
void js_int(struct js *j, const char *key, long long v);
void js_num(struct js *j, const char *key, double v);
void js_bool(struct js *j, const char *key, int v);
void js_null(struct js *j, const char *key);
void js_raw(struct js *j, const char *key, const char *raw, size_t len);
void js_escape(struct js *j, const char *s, size_t n);

/* ---- engine (engine.c) ----------------------------------------------- */

/* Codes of our own, next to ncclResult_t values in eng_op.err. */
enum { ENG_ETIMEDOUT = 100, ENG_EPROTO = 101, ENG_EABORTED = 102 };

enum { ENG_OP_IDLE = 0, ENG_OP_PENDING, ENG_OP_DONE, ENG_OP_FAILED };

struct eng;
struct eng_conn;

struct eng_op {
	struct eng_conn *c;
	void *req;
	int n, state, err;
	int sizes_known;
	int sizes[HX_MAX_RECVS];
	size_t size;	/* send: size; receive: total capacity */
	int tag;	/* send: tag; receive: tags[0] */
	long seq;	/* posting number on its comm */
	long ntests;
	int want_sizes; /* always pass sizes to test */
	int linked;	/* in its comm's queue */
	double t_post, t_done;
	struct eng_op *next;
};

struct eng_mr {
	void *mh;
	struct eng_mr *next;
};

struct eng_conn {
	struct eng *e;
	void *comm;
	int is_send;
	int peer, dev, peer_dev;
	struct eng_op *head, *tail;
	int npending;
	long nposted;
	struct eng_mr *mrs;
};

struct eng {
	struct hx_test *t;
	double deadline;
	struct eng_conn **conns;
	int nconns, capconns;
	int sizes_null_every; /* every k-th test call passes sizes == NULL (0: never) */
	int yield_after;      /* idle passes before sched_yield (0: never yield) */
	int expect_errors;    /* 1: plugin errors are results, not failures */
	int quiet_timeout;    /* 1: the caller reports timeouts */
	int mark_all;	      /* 1: mark every single receive as NCCL marks LL's (eng_irecv) */
	unsigned long ntests, nblocked, npasses, nfailed;
	unsigned idle;
	double last_abort_check;
	const char *what; /* label for messages */
};

void eng_init(struct eng *e, struct hx_test *t, const char *what);
void eng_free(struct eng *e); /* closes nothing; frees the conn table */
struct eng_conn *eng_conn_new(struct eng *e, void *comm, int is_send, int peer, int dev,
			      int peer_dev);
/* Deregisters what is still registered, then closes. 0, or the plugin's error. */
int eng_conn_close(struct eng_conn *c);
/* regMr(NCCL_PTR_HOST); *mh may legitimately come back NULL. 0, or -1 (reported). */
int eng_reg(struct eng_conn *c, void *buf, size_t size, void **mh);
int eng_dereg(struct eng_conn *c, void *mh);
/* 0 posted, 1 would block (op left idle), -1 failed (op->err). */
int eng_isend(struct eng_conn *c, void *data, size_t size, int tag, void *mh,
	      struct eng_op *op);
int eng_irecv(struct eng_conn *c, int n, void **data, size_t *sizes, int *tags, void **mh,
	      struct eng_op *op);
/* The same, retrying while progressing everything until posted or the deadline. 0 or -1. */
int eng_send(struct eng_conn *c, void *data, size_t size, int tag, void *mh, struct eng_op *op);
int eng_recv(struct eng_conn *c, int n, void **data, size_t *sizes, int *tags, void **mh,
	     struct eng_op *op);
int eng_recv1(struct eng_conn *c, void *data, size_t cap, int tag, void *mh, struct eng_op *op);
/* One pass: test the oldest pending request of every comm, as NCCL does. */
int eng_progress(struct eng *e);
int eng_wait(struct eng *e, struct eng_op *op);
/* Forgets a request (never tested again) so its storage can go; a failed helper calls
 * this for its stack ops before returning. The plugin's request is abandoned, as NCCL's
 * abort path does, until the comm is closed. */
void eng_cancel(struct eng *e, struct eng_op *op);
int eng_wait_all(struct eng *e);
int eng_expired(struct eng *e); /* deadline passed or test aborted */
void eng_idle(struct eng *e, int progressed);
size_t eng_describe(const struct eng_op *op, char *out, size_t cap);

/* One directional connection of a plan that all ranks build identically. */
enum { ENG_L_NULL_DEVCOMM = 0x1 };
struct eng_link {
	int src, sdev, dst, rdev;
	int group; /* >= 0: all links to dst with this group share one listen comm */
	int flags;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lcomm;
	struct eng_conn *send, *recv;
	long nconnect, naccept;
};
struct eng_links {
	struct eng_link *v;
	int n, cap;
};
void eng_links_add(struct eng_links *ls, int src, int sdev, int dst, int rdev, int group,
		   int flags);
int eng_links_listen(struct eng *e, struct eng_links *ls, int lo, int hi);
int eng_links_exchange(struct eng *e, struct eng_links *ls);
int eng_links_establish(struct eng *e, struct eng_links *ls, int lo, int hi);
int eng_links_open(struct eng *e, struct eng_links *ls); /* all three, every link */
int eng_links_close(struct eng *e, struct eng_links *ls, int lo, int hi);
void eng_links_free(struct eng_links *ls);
struct eng_link *eng_link_find(struct eng_links *ls, int src, int dst, int nth);

#endif /* SF_HARNESS_H */
