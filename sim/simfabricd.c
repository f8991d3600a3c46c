/* SPDX-License-Identifier: MIT */
/*
 * simfabricd.c - the fabric daemon: options, the socket, and a libevent loop
 * around the server in srv.c. Runs in the foreground until SIGINT/SIGTERM or
 * op=stop; exit status 0 then, 1 on a startup error, 2 on a usage error or a
 * scenario that does not load ("file:line:column: key: reason").
 *
 * libevent's part is small on purpose: one persistent read event per
 * connection (plus a write event while output waits), one for the listening
 * socket, one timer for the server's deadlines and the signals. Reads and
 * writes themselves are srv.c's (it passes descriptors, which bufferevents
 * cannot).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "sim/core/chan.h"
#include "sim/core/ctl.h"
#include "sim/scn/fabric.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/scn/param.h"
#include "sim/scn/place.h"
#include "sim/scn/scenario.h"
#include "sim/scn/units.h"
#include "sim/series.h"
#include "sim/sock.h"
#include "sim/srv.h"

#include "sim/core/version.h"
#define SIMFABRICD_VERSION SF_VERSION
#define ACCEPT_PAUSE_MS 100 /* after EMFILE: let connections close before accepting again */

struct io {
	struct daemon *d;
	struct srv_conn *c;
	struct event *rd, *wr;
	int rd_on, wr_on;
};

struct daemon {
	struct event_base *base;
	struct srv *srv;
	struct srv_sock sock;
	struct event *accept_ev, *timer_ev, *pause_ev, *sigint_ev, *sigterm_ev;
	int64_t timer_us; /* what timer_ev is armed for, -1 if not */
	const char *stop_reason;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: simfabricd [options]\n"
		"  --socket PATH          control socket (default: $SIMFABRIC_SOCKET, else\n"
		"                         $XDG_RUNTIME_DIR/simfabric/ctl.sock, else\n"
		"                         ~/.simfabric/ctl.sock)\n"
		"  --scenario FILE        the fabric from a scenario file (scenarios/README.md);\n"
		"                         without it, the built-in ideal fabric\n"
		"  --seed N               the models' random seed, over the scenario's (default 1)\n"
		"  --check                load the scenario, print a summary and exit (0, or 2\n"
		"                         with file:line:column: key: reason)\n"
		"  --dump-fabric          load the scenario, print the resolved fabric as op=fabric's\n"
		"                         JSON (job: and expect: included) and exit\n"
		"  --hosts H              with --dump-fabric: the fabric on H hosts, each node's\n"
		"                         host and each link's owner in the dump's \"hosts\"\n"
		"                         (docs/scale-out.md); serving: this daemon is one of\n"
		"                         H, one per host of the run (with --host-rank)\n"
		"  --host-rank R          serving with --hosts H: this daemon's host, 0..H-1\n"
		"  --epoch-ns NS          CLOCK_MONOTONIC ns of the fabric's virtual time 0, the\n"
		"                         same for every daemon of a run on one machine (simfabric\n"
		"                         launch --local-hosts sets it); at most now (default: now)\n"
		"  --dump-params FORMAT   print the parameter table (markdown or json) and exit\n"
		"  --nics N               NICs per node of the ideal fabric, 1..%d (default 1);\n"
		"                         not with --scenario\n"
		"  --conn-mem BYTES       staging memory per connection: bytes, or a size like 8M\n"
		"                         or 512KiB (K, M, G are binary: KiB, MiB, GiB)\n"
		"                         (default %u: %u slots of %u bytes)\n"
		"  --connect-wait-ms MS   how long a connect waits for a listener that is not\n"
		"                         known yet, 0..3600000 (default %d)\n"
		"  --connect-wait TIME    the same with a unit: 500ms, 2s\n"
		"  --max-conns N          control connections at once, 16..1000000; more are\n"
		"                         refused with EMFILE (default %d)\n"
		"  --partial-timeout-ms MS  a request must be complete this long after its first\n"
		"                         byte, 100..3600000; else ETIMEDOUT and closed (default %d)\n"
		"  --partial-timeout TIME  the same with a unit: 500ms, 2s\n"
		"  --sample-ms MS         sample every link's traffic this often while a channel\n"
		"                         is open (op=series), 0..%d; 0: off (default %d)\n"
		"  --sample TIME          the same with a unit: 10ms, 1s\n"
		"  --series-samples N     the newest samples kept, 1..%u (default %u;\n"
		"                         fewer where they would take over %u MiB)\n"
		"  --log-level L          error, warn, info (default) or debug\n"
		"  -v                     same as --log-level debug\n"
		"  --trace FILE           write the fault windows as Chrome trace JSON to FILE\n"
		"                         (merge with the plugin's: simfabric trace merge)\n"
		"  -h, --help, --version\n",
		FABRIC_MAX_NICS, CHAN_DEFAULT_NSLOTS * CHAN_DEFAULT_SLOT_BYTES, CHAN_DEFAULT_NSLOTS,
		CHAN_DEFAULT_SLOT_BYTES, SRV_CONNECT_WAIT_MS, SRV_MAX_CONNS, SRV_PARTIAL_MS,
		SERIES_MAX_PERIOD_MS,
		SERIES_DEFAULT_PERIOD_MS, SERIES_MAX_SAMPLES, SERIES_DEFAULT_SAMPLES,
		SERIES_MAX_BYTES >> 20);
}

/* Geometry for a staging budget: 64 KiB slots, smaller ones for budgets under two of them. */
static int geom_for_budget(uint64_t bytes, struct chan_geom *g)
{
	uint32_t slot = CHAN_DEFAULT_SLOT_BYTES;
	if (bytes < 2ull * slot)
		slot = (uint32_t)(bytes / 2 / CHAN_MIN_SLOT_BYTES * CHAN_MIN_SLOT_BYTES);
	if (slot < CHAN_MIN_SLOT_BYTES)
		return -EINVAL;
	return chan_geom_for(bytes, slot, g);
}

/* fabric_lint's lines: WARN, naming the scenario. */
static void warn_hazard(void *scenario, const char *msg)
{
	log_warn("%s: %s", (const char *)scenario, msg);
}

static int parse_int(const char *s, long min, long max, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* A flag in milliseconds: --X-ms takes a bare number of ms, --X a time with a unit ("2s",
 * "500ms"; sim/scn/units.h). 0, or 2 after saying why. */
static int parse_ms_flag(const char *flag, const char *arg, bool unit, int min, int max, int *out)
{
	char why[PARAM_ERR_LEN];
	uint64_t ns;
	if (!unit) {
		if (!parse_int(arg, min, max, out))
			return 0;
		fprintf(stderr,
			"simfabricd: --%s-ms: '%s' is not a number of milliseconds in %d..%d\n",
			flag, arg, min, max);
		return 2;
	}
	if (units_parse(arg, UNITS_TIME, UNITS_BARE_ZERO, &ns, why, sizeof(why))) {
		fprintf(stderr, "simfabricd: --%s: %s\n", flag, why);
		return 2;
	}
	if (ns % 1000000) {
		fprintf(stderr, "simfabricd: --%s: '%s' is not a whole number of milliseconds\n",
			flag, arg);
		return 2;
	}
	if (ns / 1000000 < (uint64_t)min || ns / 1000000 > (uint64_t)max) {
		char a[32], b[32];
		units_format(UNITS_TIME, (uint64_t)min * 1000000, a, sizeof(a));
		units_format(UNITS_TIME, (uint64_t)max * 1000000, b, sizeof(b));
		fprintf(stderr, "simfabricd: --%s: '%s' is not a time in %s..%s\n", flag, arg, a,
			b);
		return 2;
	}
	*out = (int)(ns / 1000000);
	return 0;
}

/* ---- srv_ops ------------------------------------------------------------- */

static void set_events(struct io *io, int rd, int wr)
{
	if (rd != io->rd_on) {
		if (rd ? event_add(io->rd, NULL) : event_del(io->rd))
			log_error("cannot %s a read event", rd ? "add" : "delete");
		io->rd_on = rd;
	}
	if (wr != io->wr_on) {
		if (wr ? event_add(io->wr, NULL) : event_del(io->wr))
			log_error("cannot %s a write event", wr ? "add" : "delete");
		io->wr_on = wr;
	}
}

static void after(struct daemon *d);

static void on_conn_read(evutil_socket_t fd, short what, void *arg)
{
	struct io *io = arg;
	struct daemon *d = io->d;
	(void)fd, (void)what;
	srv_conn_readable(io->c); /* may free io: touch nothing of it after */
	after(d);
}

static void on_conn_write(evutil_socket_t fd, short what, void *arg)
{
	struct io *io = arg;
	struct daemon *d = io->d;
	(void)fd, (void)what;
	srv_conn_writable(io->c);
	after(d);
}

static void *io_attach(void *ctx, struct srv_conn *c, int fd)
{
	struct daemon *d = ctx;
	struct io *io = calloc(1, sizeof(*io));
	if (!io)
		return NULL;
	io->d = d;
	io->c = c;
	io->rd = event_new(d->base, fd, EV_READ | EV_PERSIST, on_conn_read, io);
	io->wr = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_conn_write, io);
	if (!io->rd || !io->wr || event_add(io->rd, NULL) != 0) {
		if (io->rd)
			event_free(io->rd);
		if (io->wr)
			event_free(io->wr);
		free(io);
		return NULL;
	}
	io->rd_on = 1;
	return io;
}

static void io_watch(void *ctx, void *h, int rd, int wr)
{
	(void)ctx;
	set_events(h, rd, wr);
}

static void io_again(void *ctx, void *h)
{
	struct io *io = h;
	(void)ctx;
	event_active(io->rd, EV_READ, 0);
}

static void io_detach(void *ctx, void *h)
{
	struct io *io = h;
	(void)ctx;
	event_free(io->rd); /* safe from inside this event's own callback */
	event_free(io->wr);
	free(io);
}

/* ---- loop plumbing ------------------------------------------------------- */

/* After every callback: re-arm the deadline timer, and stop if asked to. */
static void after(struct daemon *d)
{
	if (srv_stopping(d->srv) && !d->stop_reason) {
		d->stop_reason = "op=stop";
		event_base_loopbreak(d->base);
	}
	int64_t us = srv_timeout_us(d->srv);
	if (us < 0) {
		if (d->timer_us >= 0)
			event_del(d->timer_ev);
	} else {
		struct timeval tv = {.tv_sec = (time_t)(us / 1000000),
				     .tv_usec = (suseconds_t)(us % 1000000)};
		event_add(d->timer_ev, &tv);
	}
	d->timer_us = us;
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	(void)what;
	int rc = srv_accept(d->srv, fd);
	if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM || rc == -ENOBUFS) {
		/* Level-triggered: without a pause this would spin until a descriptor frees. */
		struct timeval tv = {.tv_sec = 0, .tv_usec = ACCEPT_PAUSE_MS * 1000};
		event_del(d->accept_ev);
		event_add(d->pause_ev, &tv);
		log_warn("not accepting connections for %d ms (%s)", ACCEPT_PAUSE_MS,
			 strerror(-rc));
	}
	after(d);
}

static void on_pause_end(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	(void)fd, (void)what;
	event_add(d->accept_ev, NULL);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	(void)fd, (void)what;
	d->timer_us = -1;
	srv_tick(d->srv);
	after(d);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	(void)what;
	d->stop_reason = sig == SIGINT ? "SIGINT" : "SIGTERM";
	event_base_loopbreak(d->base);
}

/* Descriptors are the daemon's only real limit (one per connection): take what we may. */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			log_debug("setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
	}
}

/* What the command line asked for. */
struct opts {
	const char *socket_arg, *scenario, *seed_arg, *dump;
	struct srv_config cfg;
	struct fabric_config seedcfg;
	struct scenario *scn; /* once loaded (then also cfg.use_scenario) */
	enum log_level level;
	int check, dump_fabric, nics_given;
	int hosts; /* --hosts H; 0: not given */
	int host_rank; /* --host-rank R; -1: not given */
	int64_t epoch_ns; /* --epoch-ns; 0: not given */
};

/* The options into o: an exit status (--help, --version, a usage error), or -1 to go on. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		O_SOCKET = 256,
		O_SCENARIO,
		O_SEED,
		O_CHECK,
		O_DUMP_FABRIC,
		O_DUMP_PARAMS,
		O_HOSTS,
		O_HOST_RANK,
		O_EPOCH,
		O_NICS,
		O_CONN_MEM,
		O_WAIT,
		O_MAX_CONNS,
		O_PARTIAL_MS,
		O_SAMPLE_MS,
		O_WAIT_UNIT,
		O_PARTIAL_UNIT,
		O_SAMPLE_UNIT,
		O_SERIES_SAMPLES,
		O_LOG_LEVEL,
		O_TRACE,
		O_HELP,
		O_VERSION,
	};
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, O_SOCKET},
		{"scenario", required_argument, NULL, O_SCENARIO},
		{"seed", required_argument, NULL, O_SEED},
		{"check", no_argument, NULL, O_CHECK},
		{"dump-fabric", no_argument, NULL, O_DUMP_FABRIC},
		{"dump-params", required_argument, NULL, O_DUMP_PARAMS},
		{"hosts", required_argument, NULL, O_HOSTS},
		{"host-rank", required_argument, NULL, O_HOST_RANK},
		{"epoch-ns", required_argument, NULL, O_EPOCH},
		{"nics", required_argument, NULL, O_NICS},
		{"conn-mem", required_argument, NULL, O_CONN_MEM},
		{"connect-wait-ms", required_argument, NULL, O_WAIT},
		{"max-conns", required_argument, NULL, O_MAX_CONNS},
		{"partial-timeout-ms", required_argument, NULL, O_PARTIAL_MS},
		{"sample-ms", required_argument, NULL, O_SAMPLE_MS},
		{"connect-wait", required_argument, NULL, O_WAIT_UNIT},
		{"partial-timeout", required_argument, NULL, O_PARTIAL_UNIT},
		{"sample", required_argument, NULL, O_SAMPLE_UNIT},
		{"series-samples", required_argument, NULL, O_SERIES_SAMPLES},
		{"log-level", required_argument, NULL, O_LOG_LEVEL},
		{"trace", required_argument, NULL, O_TRACE},
		{"help", no_argument, NULL, O_HELP},
		{"version", no_argument, NULL, O_VERSION},
		{NULL, 0, NULL, 0},
	};
	char err[SCN_ERR_LEN];
	int opt;
	memset(o, 0, sizeof(*o));
	o->host_rank = -1;
	o->level = LOG_LEVEL_INFO;
	srv_config_init(&o->cfg);
	log_init("simfabricd", o->level);
	while ((opt = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
		switch (opt) {
		case O_SOCKET:
			o->socket_arg = optarg;
			break;
		case O_SCENARIO:
			o->scenario = optarg;
			break;
		case O_SEED:
			fabric_config_init(&o->seedcfg);
			if (fabric_config_set(&o->seedcfg, "seed", optarg, err, sizeof(err))) {
				fprintf(stderr, "simfabricd: --%s\n", err);
				return 2;
			}
			o->seed_arg = optarg;
			break;
		case O_CHECK:
			o->check = 1;
			break;
		case O_DUMP_FABRIC:
			o->dump_fabric = 1;
			break;
		case O_DUMP_PARAMS:
			o->dump = optarg;
			break;
		case O_HOSTS: {
			char *end;
			long h = strtol(optarg, &end, 10);
			if (!*optarg || *end || optarg[0] == '-' || optarg[0] == '+' || h < 1 ||
			    h > PLACE_MAX_HOSTS) {
				fprintf(stderr, "simfabricd: --hosts: '%s' is not a host count in 1..%d\n",
					optarg, PLACE_MAX_HOSTS);
				return 2;
			}
			o->hosts = (int)h;
			break;
		}
		case O_HOST_RANK:
			if (parse_int(optarg, 0, PLACE_MAX_HOSTS - 1, &o->host_rank)) {
				fprintf(stderr, "simfabricd: --host-rank: '%s' is not a host rank in "
						"0..%d\n",
					optarg, PLACE_MAX_HOSTS - 1);
				return 2;
			}
			break;
		case O_EPOCH: {
			char *end;
			errno = 0;
			long long e = strtoll(optarg, &end, 10);
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			long long now = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
			if (!*optarg || *end || errno || e <= 0 || e > now) {
				fprintf(stderr, "simfabricd: --epoch-ns: '%s' is not a CLOCK_MONOTONIC "
						"time in ns between 1 and now (%lld)\n",
					optarg, now);
				return 2;
			}
			o->epoch_ns = e;
			break;
		}
		case O_NICS:
			if (fabric_config_set(&o->cfg.fabric, "nics_per_node", optarg, err,
					      sizeof(err))) {
				fprintf(stderr, "simfabricd: --nics: %s\n", err);
				return 2;
			}
			o->nics_given = 1;
			break;
		case O_CONN_MEM: {
			uint64_t b;
			char why[PARAM_ERR_LEN];
			if (units_parse(optarg, UNITS_SIZE, UNITS_BARE, &b, why, sizeof(why))) {
				fprintf(stderr, "simfabricd: --conn-mem: %s\n", why);
				return 2;
			}
			if (geom_for_budget(b, &o->cfg.geom)) {
				fprintf(stderr,
					"simfabricd: --conn-mem: '%s' is not a usable size: %u bytes "
					"to %llu MiB (K, M, G suffixes allowed)\n",
					optarg, 2 * CHAN_MIN_SLOT_BYTES,
					(unsigned long long)(CHAN_MAX_SHM_BYTES >> 21));
				return 2;
			}
			break;
		}
		case O_WAIT:
		case O_WAIT_UNIT:
			if (parse_ms_flag("connect-wait", optarg, opt == O_WAIT_UNIT, 0, 3600000,
					  &o->cfg.connect_wait_ms))
				return 2;
			break;
		case O_MAX_CONNS:
			if (parse_int(optarg, 16, 1000000, &o->cfg.max_conns)) {
				fprintf(stderr,
					"simfabricd: --max-conns: '%s' is not a number of connections "
					"in 16..1000000\n",
					optarg);
				return 2;
			}
			break;
		case O_PARTIAL_MS:
		case O_PARTIAL_UNIT:
			if (parse_ms_flag("partial-timeout", optarg, opt == O_PARTIAL_UNIT, 100,
					  3600000, &o->cfg.partial_ms))
				return 2;
			break;
		case O_SAMPLE_MS:
		case O_SAMPLE_UNIT:
			if (parse_ms_flag("sample", optarg, opt == O_SAMPLE_UNIT, 0,
					  SERIES_MAX_PERIOD_MS, &o->cfg.sample_ms))
				return 2;
			break;
		case O_SERIES_SAMPLES: {
			int n;
			if (parse_int(optarg, 1, SERIES_MAX_SAMPLES, &n)) {
				fprintf(stderr,
					"simfabricd: --series-samples: '%s' is not a number of "
					"samples in 1..%u\n",
					optarg, SERIES_MAX_SAMPLES);
				return 2;
			}
			o->cfg.series_samples = (uint32_t)n;
			break;
		}
		case O_LOG_LEVEL:
			if (log_level_parse(optarg, &o->level)) {
				fprintf(stderr,
					"simfabricd: --log-level: '%s' is not one of error, warn, "
					"info, debug\n",
					optarg);
				return 2;
			}
			break;
		case 'v':
			o->level = LOG_LEVEL_DEBUG;
			break;
		case O_TRACE:
			faultd_trace_to(optarg);
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			return 0;
		case O_VERSION:
			printf("simfabricd %s (control protocol 1)\n", SIMFABRICD_VERSION);
			return 0;
		default: /* getopt has said what was wrong */
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "simfabricd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	log_set_level(o->level);
	return -1;
}

/*
 * The modes that answer without serving (--dump-params, --check, --dump-fabric) and the
 * scenario's loading, which serving needs too: an exit status, or -1 to go on serving
 * (o->scn loaded, when a scenario was given).
 */
static int run_offline(struct opts *o)
{
	char err[SCN_ERR_LEN];
	if (o->dump) {
		if (param_dump(stdout, o->dump)) {
			fprintf(stderr, "simfabricd: --dump-params: '%s' is not markdown or json\n",
				o->dump);
			return 2;
		}
		return 0;
	}
	if (o->scenario && o->nics_given) {
		fprintf(stderr, "simfabricd: --nics: not with --scenario (the scenario says how many "
				"NICs each node has)\n");
		return 2;
	}
	if (o->dump_fabric && o->host_rank >= 0) {
		fprintf(stderr, "simfabricd: --host-rank: not with --dump-fabric (the dump shows "
				"every host)\n");
		return 2;
	}
	if (!o->dump_fabric && o->hosts && o->host_rank < 0) {
		fprintf(stderr, "simfabricd: --hosts: with --dump-fabric (the placement), or with "
				"--host-rank R (serving one host of several)\n");
		return 2;
	}
	if (o->host_rank >= 0 && !o->hosts) {
		fprintf(stderr, "simfabricd: --host-rank: serving one host of several needs --hosts "
				"H too\n");
		return 2;
	}
	if (o->hosts && o->check) {
		fprintf(stderr, "simfabricd: --hosts: not with --check\n");
		return 2;
	}
	if (o->host_rank >= o->hosts && o->hosts) {
		fprintf(stderr, "simfabricd: --host-rank %d: not one of the %d host(s) of --hosts "
				"(0..%d)\n",
			o->host_rank, o->hosts, o->hosts - 1);
		return 2;
	}
	o->cfg.hosts = o->dump_fabric ? 0 : o->hosts;
	o->cfg.host_rank = o->host_rank < 0 ? 0 : o->host_rank;
	o->cfg.epoch_ns = o->epoch_ns;
	if ((o->check || o->dump_fabric) && !o->scenario) {
		fprintf(stderr, "simfabricd: --%s: needs --scenario FILE\n",
			o->check ? "check" : "dump-fabric");
		return 2;
	}
	if (o->scenario) {
		int rc = scn_load(o->scenario, &o->scn, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "simfabricd: %s\n", err);
			return 2;
		}
		struct fabric *f = o->scn->fabric;
		if (o->seed_arg)
			fabric_set_seed(f, o->seedcfg.seed);
		if (fabric_lint(f, warn_hazard, (void *)o->scenario) < 0)
			log_warn("%s: out of memory checking the fabric for hazards", o->scenario);
		if (o->dump_fabric) { /* stdout: the JSON alone */
			const char *js;
			size_t jl;
			if (o->hosts && scenario_place(o->scn, o->hosts, err, sizeof(err))) {
				fprintf(stderr, "simfabricd: %s\n", err);
				scenario_free(o->scn);
				return 2;
			}
			rc = scenario_json(o->scn, o->hosts != 0, &js, &jl);
			if (!rc)
				printf("%s\n", js);
			scenario_free(o->scn);
			return rc ? 1 : 0;
		}
		if (o->check) {
			printf("%s: ok: fabric %s '%s', %d node(s), %d NIC(s), %d switch(es), %d "
			       "link(s), seed %llu\n",
			       o->scenario, fabric_kind(f), fabric_name(f), fabric_nnodes(f),
			       fabric_nnics(f), fabric_nswitches(f), fabric_nlinks(f) / 2,
			       (unsigned long long)fabric_seed(f));
			scenario_free(o->scn);
			return 0;
		}
		o->cfg.use_scenario = o->scn; /* srv_new takes it over */
	} else if (o->seed_arg) {
		o->cfg.fabric.seed = o->seedcfg.seed;
	}
	return -1;
}

/* Serve until op=stop or a signal: the socket, the server, the event loop. The exit status. */
static int run_daemon(struct opts *o)
{
	char path[sizeof(((struct srv_sock *)0)->path)];
	char err[SCN_ERR_LEN];
	int rc, status = 1;
	struct fabric *fabric = o->scn ? o->scn->fabric : NULL; /* srv_new takes o->scn over */

	int drc;
	if (o->socket_arg) {
		if (snprintf(path, sizeof(path), "%s", o->socket_arg) >= (int)sizeof(path)) {
			fprintf(stderr, "simfabricd: --socket: '%s' is longer than %zu bytes\n",
				o->socket_arg, sizeof(path) - 1);
			scenario_free(o->cfg.use_scenario);
			return 2;
		}
	} else if ((drc = ctl_default_socket(path, sizeof(path))) != 0) {
		fprintf(stderr, "simfabricd: cannot work out the default socket path: %s (check "
				"SIMFABRIC_SOCKET, XDG_RUNTIME_DIR and the home directory)\n",
			strerror(-drc));
		scenario_free(o->cfg.use_scenario);
		return 1;
	}

	struct daemon d = {.timer_us = -1};
	d.sock.fd = d.sock.lock_fd = -1;
	signal(SIGPIPE, SIG_IGN);
	umask(077);
	raise_nofile();

	struct event_config *ec = event_config_new();
	if (ec) {
		/* The loop owns the whole process: no locking needed. Deadlines (the link sampler,
		 * fault windows) want better than epoll's whole milliseconds: a timerfd. */
		event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
		event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
		d.base = event_base_new_with_config(ec);
		event_config_free(ec);
	}
	if (!d.base) {
		fprintf(stderr, "simfabricd: cannot create the event loop\n");
		scenario_free(o->cfg.use_scenario);
		goto out;
	}
	struct srv_ops ops = {
		.ctx = &d, .attach = io_attach, .watch = io_watch, .again = io_again,
		.detach = io_detach};
	rc = srv_sock_open(&d.sock, path, err, sizeof(err));
	if (rc == 0)
		rc = srv_new(&o->cfg, &ops, &d.srv, err, sizeof(err));
	else
		scenario_free(o->cfg.use_scenario);
	if (rc) {
		fprintf(stderr, "simfabricd: %s\n", err);
		goto out;
	}
	d.accept_ev = event_new(d.base, d.sock.fd, EV_READ | EV_PERSIST, on_accept, &d);
	d.timer_ev = event_new(d.base, -1, 0, on_timer, &d);
	d.pause_ev = event_new(d.base, -1, 0, on_pause_end, &d);
	d.sigint_ev = evsignal_new(d.base, SIGINT, on_signal, &d);
	d.sigterm_ev = evsignal_new(d.base, SIGTERM, on_signal, &d);
	if (!d.accept_ev || !d.timer_ev || !d.pause_ev || !d.sigint_ev || !d.sigterm_ev ||
	    event_add(d.accept_ev, NULL) || event_add(d.sigint_ev, NULL) ||
	    event_add(d.sigterm_ev, NULL)) {
		fprintf(stderr, "simfabricd: cannot set up the event loop's events\n");
		goto out;
	}

	uint64_t cm = srv_conn_mem(d.srv);
	int nics = (int)o->cfg.fabric.nics_per_node;
	/* Exactly these lines, at every log level: scripts wait for "listening on". */
	if (!fabric)
		log_always("listening on %s (fabric %s, %d NIC(s) per node, conn-mem %llu)", path,
			   srv_fabric_kind(d.srv), nics, (unsigned long long)cm);
	else
		log_always("listening on %s (fabric %s, scenario %s, seed %llu, conn-mem %llu)",
			   path, fabric_kind(fabric), o->scenario,
			   (unsigned long long)fabric_seed(fabric), (unsigned long long)cm);
	log_info("instance %s, pid %d, %u slots of %u bytes per connection (%zu bytes of shared "
		 "memory), connect wait %d ms, log level %s",
		 srv_instance(d.srv), (int)getpid(), o->cfg.geom.nslots, o->cfg.geom.slot_bytes,
		 srv_shm_bytes(d.srv), o->cfg.connect_wait_ms, log_level_name(o->level));
	if (o->cfg.hosts)
		log_info("host %d of %d: routes to the other hosts' nodes are split by the placement%s"
			 "%s",
			 o->cfg.host_rank, o->cfg.hosts, o->epoch_ns ? "; virtual time 0 from "
								       "--epoch-ns"
								     : "",
			 fabric ? "" : " (the ideal fabric: cross-host connections unmodelled)");
	/* Log lines carry the wall clock; traces, fabric time and epoch_ns count on CLOCK_MONOTONIC.
	 * This line pairs the two. */
	struct timespec mono;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	log_info("clocks: this line's time is CLOCK_MONOTONIC %lld.%06ld s (the clock of traces "
		 "and epoch_ns)",
		 (long long)mono.tv_sec, mono.tv_nsec / 1000);
	if (fabric)
		log_info("scenario %s: '%s', %d node(s), %d NIC(s), %d switch(es), %d link(s); seed "
			 "%llu (%s)",
			 o->scenario, fabric_name(fabric), fabric_nnodes(fabric), fabric_nnics(fabric),
			 fabric_nswitches(fabric), fabric_nlinks(fabric) / 2,
			 (unsigned long long)fabric_seed(fabric),
			 o->seed_arg ? "from --seed" : "from the scenario or the default");
	else
		log_info("seed %llu (%s)", (unsigned long long)o->cfg.fabric.seed,
			 o->seed_arg ? "from --seed" : "the default");

	if (event_base_loop(d.base, EVLOOP_NO_EXIT_ON_EMPTY) < 0) {
		log_error("the event loop failed");
		goto out;
	}
	log_info("stopping: %s", d.stop_reason ? d.stop_reason : "the loop ended");
	status = 0;
out:
	srv_free(d.srv); /* before the events: it detaches every connection's */
	srv_sock_close(&d.sock);
	if (d.accept_ev)
		event_free(d.accept_ev);
	if (d.timer_ev)
		event_free(d.timer_ev);
	if (d.pause_ev)
		event_free(d.pause_ev);
	if (d.sigint_ev)
		event_free(d.sigint_ev);
	if (d.sigterm_ev)
		event_free(d.sigterm_ev);
	if (d.base)
		event_base_free(d.base);
	libevent_global_shutdown();
	return status;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc < 0)
		rc = run_offline(&o);
	if (rc < 0)
		rc = run_daemon(&o);
	return rc;
}
