/* SPDX-License-Identifier: MIT */
/*
 * test_job.c - the scenario's job: and expect: sections (sim/scn/job.c): what
 * they resolve to (the exact JSON the fabric dump carries), and every kind of
 * error with its exact "file:line:column: key: reason".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/scenario.h"

#include "sim/test/check.h"

#define TWO "fabric: {nodes: {count: 2, name: \"node{i}\"}}\n"
#define FOUR "fabric: {nodes: {count: 4, name: \"node{i}\"}}\n"
#define IDEAL "fabric: {kind: ideal}\n"
#define FLT                                                                                        \
	"fabric: {nodes: {count: 2, name: \"node{i}\"}, switches: [{name: sw0}],\n"                \
	"  links: [{ends: [[node0, node1], sw0]}]}\nfaults:\n"                                    \
	"  - {name: cut, action: link_down, link: node0, at: 1ms, for: 1ms}\n"

/* Resolved: the job's and the expect's JSON texts must be these (NULL: not checked). */
static void test_resolve(void)
{
	static const struct {
		const char *yaml, *job, *expect;
	} cases[] = {
		{TWO "job: {program: harness, tests: [sizes, allreduce]}",
		 "{\"ranks\":2,\"program\":\"harness\",\"nodes\":[\"node0\",\"node1\"],"
		 "\"gpus_per_node\":1,\"timeout_s\":600,\"env\":{},\"args\":[],"
		 "\"tests\":[\"sizes\",\"allreduce\"],\"max_bytes\":null,\"bound_s\":null,"
		 "\"api_version\":null,\"node_prefix\":\"node\"}",
		 NULL},
		{TWO "job: {program: harness, tests: \"sizes, tags\", max_bytes: 1M, bound_s: 2.5, "
		     "api_version: 10, timeout_s: 60}",
		 "{\"ranks\":2,\"program\":\"harness\",\"nodes\":[\"node0\",\"node1\"],"
		 "\"gpus_per_node\":1,\"timeout_s\":60,\"env\":{},\"args\":[],"
		 "\"tests\":[\"sizes\",\"tags\"],\"max_bytes\":1048576,\"bound_s\":2.5,"
		 "\"api_version\":10,\"node_prefix\":\"node\"}",
		 NULL},
		{IDEAL "job: {program: harness, nodes: 3}",
		 "{\"ranks\":3,\"program\":\"harness\",\"nodes\":[\"node0\",\"node1\",\"node2\"],"
		 "\"gpus_per_node\":1,\"timeout_s\":600,\"env\":{},\"args\":[],\"tests\":\"all\","
		 "\"max_bytes\":null,\"bound_s\":null,\"api_version\":null,\"node_prefix\":\"node\"}",
		 NULL},
		{FOUR "job: {program: nccl, nodes: 2, gpus_per_node: 2, collectives: [sendrecv, "
		      "allreduce], sizes: {min: 1K, max: 1M, factor: 32}, dtype: float16, op: max, "
		      "iters: 3, warmup: 0, op_timeout_s: 10}",
		 "{\"ranks\":4,\"program\":\"nccl\",\"nodes\":[\"node0\",\"node1\"],"
		 "\"gpus_per_node\":2,\"timeout_s\":600,\"env\":{},\"args\":[],"
		 "\"collectives\":[\"allreduce\",\"sendrecv\"],\"sizes\":[1024,32768,1048576],"
		 "\"iters\":3,\"warmup\":0,\"dtype\":\"half\",\"op\":\"max\",\"op_timeout_s\":10}",
		 NULL},
		{TWO "job: {program: nccl}",
		 "{\"ranks\":2,\"program\":\"nccl\",\"nodes\":[\"node0\",\"node1\"],"
		 "\"gpus_per_node\":1,\"timeout_s\":600,\"env\":{},\"args\":[],"
		 "\"collectives\":[\"allreduce\",\"allgather\",\"reducescatter\",\"broadcast\","
		 "\"reduce\",\"alltoall\",\"sendrecv\"],\"sizes\":[8,16,32,64,128,256,512,1024,2048,"
		 "4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152,4194304,8388608,"
		 "16777216,33554432,67108864],\"iters\":20,\"warmup\":5,\"dtype\":\"float\","
		 "\"op\":\"sum\",\"op_timeout_s\":null}",
		 NULL},
		{FOUR "job: {program: torch, ranks: 8, collectives: all, sizes: [8, 4K]}",
		 "{\"ranks\":8,\"program\":\"torch\",\"nodes\":[\"node0\",\"node1\",\"node2\","
		 "\"node3\"],\"gpus_per_node\":2,\"timeout_s\":600,\"env\":{},\"args\":[],"
		 "\"collectives\":[\"allreduce\",\"allgather\",\"reducescatter\",\"broadcast\","
		 "\"alltoall\",\"sendrecv\"],\"sizes\":[8,4096],\"iters\":20,\"warmup\":5}",
		 NULL},
		{FOUR "job: {program: command, nodes: [node3, node1], command: [python3, -c, "
		      "\"print('\\u00e9')\"], env: {A_1: x, B: \"2\"}, args: [--x]}",
		 "{\"ranks\":2,\"program\":\"command\",\"nodes\":[\"node3\",\"node1\"],"
		 "\"gpus_per_node\":1,\"timeout_s\":600,\"env\":{\"A_1\":\"x\",\"B\":\"2\"},"
		 "\"args\":[\"--x\"],\"command\":[\"python3\",\"-c\",\"print('\\u00e9')\"]}",
		 NULL},
		{TWO "job: {program: nccl}\nexpect: {}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":null}"},
		{TWO "job: {program: nccl}\nexpect: {data: unchecked, timing: {busbw: [0.3, 1.05]}}",
		 NULL,
		 "{\"data\":\"unchecked\",\"timing\":{\"model\":\"best\",\"busbw\":[0.3,1.05],"
		 "\"latency\":[0,1.05],\"min_bytes\":1048576,\"collectives\":null},\"failure\":null}"},
		{TWO "job: {program: harness, tests: [bench]}\nexpect:\n  timing: {model: ring, busbw: "
		     "[0.1, 1.02], latency: [0.2, 1.5], min_bytes: 64K, collectives: [sendrecv]}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":{\"model\":\"ring\",\"busbw\":[0.1,1.02],"
		 "\"latency\":[0.2,1.5],\"min_bytes\":65536,\"collectives\":[\"sendrecv\"]},"
		 "\"failure\":null}"},
		{TWO "job: {program: nccl}\nexpect:\n  failure: {error: ncclRemoteError, exit: 3, "
		     "ranks: [1, 0], within_s: 30}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":{\"error\":\"ncclRemoteError\","
		 "\"exit\":[3],\"signal\":null,\"ranks\":[1,0],\"within_s\":30}}"},
		{TWO "job: {program: command, command: [x]}\nexpect:\n  failure: {signal: KILL, ranks: "
		     "all}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":{\"error\":null,\"exit\":null,"
		 "\"signal\":\"SIGKILL\",\"ranks\":\"all\",\"within_s\":null}}"},
		{TWO "job: {program: command, command: [x]}\nexpect:\n  failure: {signal: 15, exit: "
		     "null}",
		 NULL, NULL},
		{TWO "job: {program: command, command: [x]}\nexpect:\n  failure: {}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":{\"error\":null,\"exit\":null,"
		 "\"signal\":null,\"ranks\":\"any\",\"within_s\":null}}"},
		{TWO "job: {program: nccl}\nexpect: {data: wrong}",
		 NULL,
		 "{\"data\":\"wrong\",\"timing\":null,\"failure\":null}"},
		{TWO "job: {program: harness, timeout_s: 60}\nexpect: {failure: {hang: 2500ms}}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":{\"error\":null,\"exit\":null,"
		 "\"signal\":null,\"ranks\":\"any\",\"within_s\":null,\"hang_s\":2.5}}"},
		{TWO "job: ~\nexpect: ~", "", ""}, /* empty sections: none */
		{FLT "job: {program: harness}\nexpect: {faults: {may_miss: [cut]}}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":null,"
		 "\"faults\":{\"may_miss\":[\"cut\"]}}"},
		{FLT "job: {program: harness}\nexpect: {faults: {may_miss: all}}",
		 NULL,
		 "{\"data\":\"exact\",\"timing\":null,\"failure\":null,"
		 "\"faults\":{\"may_miss\":\"all\"}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[SCN_ERR_LEN];
		struct scenario *sc = NULL;
		const char *y = cases[i].yaml;
		int rc = scn_load_buffer("t.yaml", y, strlen(y), &sc, err, sizeof(err));
		CHECK(rc == 0 && sc, "case %zu: %d %s\n%s", i, rc, err, y);
		if (rc)
			continue;
		const char *job = sc->job_json;
		const char *exp = sc->expect_json;
		if (cases[i].job && *cases[i].job)
			CHECK(job && !strcmp(job, cases[i].job), "case %zu job:\n got  %s\n want %s", i,
			      job ? job : "(null)", cases[i].job);
		else if (cases[i].job)
			CHECK(!job, "case %zu: no job, got %s", i, job);
		if (cases[i].expect && *cases[i].expect)
			CHECK(exp && !strcmp(exp, cases[i].expect),
			      "case %zu expect:\n got  %s\n want %s", i, exp ? exp : "(null)",
			      cases[i].expect);
		else if (cases[i].expect)
			CHECK(!exp, "case %zu: no expect, got %s", i, exp);
		/* ... and the dump carries them under their names. */
		const char *js;
		size_t jl;
		CHECK(scenario_json(sc, false, &js, &jl) == 0 && (!job || strstr(js, job)) &&
			      (!exp || strstr(js, exp)),
		      "case %zu: the dump carries job and expect", i);
		scenario_free(sc);
	}
}

/* Every kind of error, exactly. */
static void test_errors(void)
{
	static const struct {
		const char *yaml, *err;
	} cases[] = {
		/* job: */
		{TWO "job: [x]",
		 "t.yaml:2:6: job: expected a mapping like {program: nccl, nodes: 2, collectives: "
		 "all}, got a sequence"},
		{TWO "job: {nodes: 2}",
		 "t.yaml:2:6: program: missing: a job needs a program (one of harness, nccl, torch, "
		 "command)"},
		{TWO "job: {program: mpi}",
		 "t.yaml:2:16: program: 'mpi' is not one of harness, nccl, torch, command"},
		{TWO "job: {program: nccl, colectives: all}",
		 "t.yaml:2:22: colectives: unknown key in job (known: program, nodes, ranks, "
		 "gpus_per_node, timeout_s, env, args, tests, max_bytes, bound_s, api_version, "
		 "collectives, sizes, iters, warmup, dtype, op, op_timeout_s, command)"},
		{TWO "job: {program: harness, sizes: [8]}",
		 "t.yaml:2:25: sizes: not a key of program harness (its keys: program, nodes, ranks, "
		 "gpus_per_node, timeout_s, env, args, tests, max_bytes, bound_s, api_version)"},
		{TWO "job: {program: command}",
		 "t.yaml:2:6: command: missing: program command needs command: [the program, its "
		 "arguments...]"},
		{TWO "job: {program: command, command: \"ls -l\"}",
		 "t.yaml:2:34: command: expected a list of arguments like [python3, -c, \"print(1)\"], "
		 "got the scalar 'ls -l'"},
		{TWO "job: {program: command, command: []}",
		 "t.yaml:2:34: command: an empty list (the program to run comes first)"},
		{IDEAL "job: {program: nccl}",
		 "t.yaml:2:6: nodes: missing: the ideal fabric makes nodes on demand, so the job says "
		 "how many (nodes: N)"},
		{TWO "job: {program: nccl, nodes: 3}",
		 "t.yaml:2:29: nodes: '3' is not an integer in 1..2 (count)"},
		{FOUR "job: {program: nccl, nodes: [node0, node7]}",
		 "t.yaml:2:37: nodes: unknown node 'node7' (the fabric's: node0, node1, node2, node3)"},
		{FOUR "job: {program: nccl, nodes: [node0, node0]}",
		 "t.yaml:2:37: nodes: 'node0' is listed twice"},
		{IDEAL "job: {program: nccl, nodes: [a, \"b c\"]}",
		 "t.yaml:2:33: nodes: node name 'b c' has character 0x20 at position 2; allowed are "
		 "[A-Za-z0-9._-]"},
		{FOUR "job: {program: nccl, ranks: 6}",
		 "t.yaml:2:29: ranks: 6 ranks do not split evenly over 4 node(s) (the fabric's; say "
		 "nodes: too)"},
		{FOUR "job: {program: nccl, nodes: 2, gpus_per_node: 2, ranks: 6}",
		 "t.yaml:2:57: ranks: 6 is not nodes x gpus_per_node = 2 x 2"},
		{TWO "job: {program: harness, gpus_per_node: 2}",
		 "t.yaml:2:40: gpus_per_node: the harness runs one process per node, so 2 ranks per "
		 "node cannot be"},
		{FOUR "job: {program: harness, nodes: [node1, node2]}",
		 "t.yaml:2:32: nodes: the harness names its ranks <prefix><rank> (node0, node1, ...): "
		 "node 0 is 'node1', not 'node0'"},
		{FOUR "job: {program: harness, tests: [bench]}",
		 "t.yaml:2:32: tests: the harness's bench runs on 2 ranks, not 4"},
		{TWO "job: {program: harness, tests: [Sizes]}",
		 "t.yaml:2:33: tests: 'Sizes' is not a test name ([a-z0-9_]; `simfabric-harness "
		 "--list` lists them)"},
		{TWO "job: {program: harness, tests: [all, sizes]}",
		 "t.yaml:2:32: tests: 'all' already names every non-destructive test"},
		{TWO "job: {program: nccl, collectives: [allreduce, bcast]}",
		 "t.yaml:2:47: collectives: 'bcast' is not a collective (known: all, allreduce, "
		 "allgather, reducescatter, broadcast, reduce, alltoall, sendrecv)"},
		{TWO "job: {program: nccl, collectives: \"allreduce,allreduce\"}",
		 "t.yaml:2:35: collectives: 'allreduce' is listed twice"},
		{TWO "job: {program: torch, collectives: [reduce]}",
		 "t.yaml:2:37: collectives: 'reduce' is not among tools/torch_collectives.py's "
		 "collectives (allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv)"},
		{TWO "job: {program: nccl, sizes: [8, 1X]}",
		 "t.yaml:2:33: sizes: '1X' has an unknown unit 'X' (a size takes B, K, M, G or T, "
		 "binary: 1K = 1KB = 1KiB = 1024 B; a bare number is bytes)"},
		{TWO "job: {program: nccl, sizes: [999999999999G]}",
		 "t.yaml:2:30: sizes: '999999999999G' is not a size in 1..17179869184 bytes (an "
		 "integer, K, M, G suffixes allowed: 64K, 1M)"},
		{TWO "job: {program: nccl, sizes: {min: 1M, max: 1K}}",
		 "t.yaml:2:44: max: 1024 is below min 1048576"},
		{TWO "job: {program: nccl, sizes: {min: 1, max: 1G, fact: 2}}",
		 "t.yaml:2:47: fact: unknown key in sizes (known: min, max, factor)"},
		{TWO "job: {program: nccl, dtype: float8}",
		 "t.yaml:2:29: dtype: 'float8' is not one of int8, uint8, int32, uint32, int64, uint64, "
		 "half, float, double, bfloat16, float16, float32, float64"},
		{TWO "job: {program: nccl, iters: 0}",
		 "t.yaml:2:29: iters: '0' is not an integer in 1..1000000"},
		{TWO "job: {program: nccl, timeout_s: 1.5}",
		 "t.yaml:2:33: timeout_s: '1.5' is not an integer in 1..86400 (seconds)"},
		{TWO "job: {program: nccl, op_timeout_s: -1}",
		 "t.yaml:2:36: op_timeout_s: '-1' is not a number in 0.001..86400 (seconds) (like 2 "
		 "or 0.5)"},
		{TWO "job: {program: nccl, env: {NCCL_NET: Socket}}",
		 "t.yaml:2:28: NCCL_NET: set by the launcher for every rank; a job cannot set it"},
		{TWO "job: {program: nccl, env: {1X: a}}",
		 "t.yaml:2:28: env: '1X' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"},
		{TWO "job: {program: nccl, env: {A: [1]}}",
		 "t.yaml:2:31: A: expected a string, got a sequence"},
		{TWO "job: {program: nccl, args: [--x, {a: 1}]}",
		 "t.yaml:2:34: args: expected a string, got a mapping"},
		/* expect: */
		{TWO "expect: {}", "t.yaml:2:9: expect: needs a job: section (what to run)"},
		{TWO "job: {program: nccl}\nexpect: {dat: exact}",
		 "t.yaml:3:10: dat: unknown key in expect (known: data, timing, failure, faults, "
		 "flight_recorder)"},
		{FLT "job: {program: harness}\nexpect: {faults: {may_miss: [cut, nope]}}",
		 "t.yaml:6:35: may_miss: 'nope' is not a fault of this scenario (its faults: cut)"},
		{TWO "job: {program: harness}\nexpect: {faults: {may_miss: [x]}}",
		 "t.yaml:3:18: faults: the scenario has no faults: section"},
		{FLT "job: {program: harness}\nexpect: {faults: {may_mis: [cut]}}",
		 "t.yaml:6:19: may_mis: unknown key in faults (known: may_miss)"},
		{TWO "job: {program: nccl}\nexpect: {data: right}",
		 "t.yaml:3:16: data: 'right' is not one of exact, wrong, unchecked"},
		{TWO "job: {program: harness}\nexpect: {data: unchecked}",
		 "t.yaml:3:16: data: program harness always checks its data (exact or wrong)"},
		{TWO "job: {program: nccl}\nexpect: {data: wrong, failure: {exit: 2}}",
		 "t.yaml:3:32: failure: data: wrong is a failure of its own; not with failure: as "
		 "well"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [0.5, 1.1]}, failure: {}}",
		 "t.yaml:3:18: timing: not with failure: (a failing job's times are not held to the "
		 "model)"},
		{IDEAL "job: {program: nccl, nodes: 2}\nexpect: {timing: {busbw: [0.5, 1.1]}}",
		 "t.yaml:3:18: timing: the ideal fabric has no latency or bandwidth to hold a job to"},
		{TWO "job: {program: harness, tests: [sizes]}\nexpect: {timing: {busbw: [0.5, 1.1]}}",
		 "t.yaml:3:18: timing: the harness measures only in its bench test (job: tests: "
		 "[bench])"},
		{TWO "job: {program: harness, tests: [sizes], env: {X: bench}}\nexpect: {timing: "
		     "{busbw: [0.5, 1.1]}}",
		 "t.yaml:3:18: timing: the harness measures only in its bench test (job: tests: "
		 "[bench])"},
		{FOUR "job: {program: nccl, nodes: 1, gpus_per_node: 4}\nexpect: {timing: {busbw: "
		      "[0.5, 1.1]}}",
		 "t.yaml:3:18: timing: a job on one node crosses no fabric link: there is nothing to "
		 "model"},
		{TWO "job: {program: nccl}\nexpect: {timing: {}}",
		 "t.yaml:3:18: busbw: missing: timing needs busbw: [lo, hi] (measured busbw / the "
		 "model's)"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [0.5]}}",
		 "t.yaml:3:26: busbw: [lo, hi] has 2 numbers, not 1"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [0.5, 0.9]}}",
		 "t.yaml:3:32: busbw: hi 0.9 is below 1: the measurement would have to be slower than "
		 "the model (hi says how much faster than the model it may be)"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [2, 1.5]}}",
		 "t.yaml:3:26: busbw: lo 2 is not below hi 1.5"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [x, 1.5]}}",
		 "t.yaml:3:27: busbw: 'x' is not a number in 0..100 (measured / model) (like 2 or "
		 "0.5)"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [0.1, 1.5], model: ideal}}",
		 "t.yaml:3:45: model: 'ideal' is not one of best, ring, tree"},
		{TWO "job: {program: nccl}\nexpect: {timing: {busbw: [0.1, 1.5], tolerance: 1}}",
		 "t.yaml:3:38: tolerance: unknown key in timing (known: model, busbw, latency, "
		 "min_bytes, collectives)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {error: ncclRemote}}",
		 "t.yaml:3:27: error: 'ncclRemote' is not one of ncclUnhandledCudaError, "
		 "ncclSystemError, ncclInternalError, ncclInvalidArgument, ncclInvalidUsage, "
		 "ncclRemoteError, ncclInProgress, timeout"},
		{TWO "job: {program: nccl}\nexpect: {failure: {exit: 3, signal: SIGKILL}}",
		 "t.yaml:3:37: signal: give exit or signal, not both (a process that dies of a signal "
		 "has no exit status)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {exit: 0}}",
		 "t.yaml:3:26: exit: '0' is not an integer in 1..255 (exit status)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {signal: SIGFOO}}",
		 "t.yaml:3:28: signal: 'SIGFOO' is not a signal (SIGKILL, KILL or 9; known: SIGHUP, "
		 "SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGKILL, SIGUSR1, SIGSEGV, "
		 "SIGUSR2, SIGPIPE, SIGALRM, SIGTERM)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {ranks: [0, 2]}}",
		 "t.yaml:3:31: ranks: '2' is not an integer in 0..1 (the job's ranks)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {ranks: [1, 1]}}",
		 "t.yaml:3:31: ranks: rank 1 is listed twice"},
		{TWO "job: {program: nccl}\nexpect: {failure: {ranks: some}}",
		 "t.yaml:3:27: ranks: expected a list of ranks, all or any, got the scalar 'some'"},
		{TWO "job: {program: nccl, timeout_s: 10}\nexpect: {failure: {within_s: 20}}",
		 "t.yaml:3:30: within_s: 20 s is longer than the job's timeout_s (10)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {after: 1}}",
		 "t.yaml:3:20: after: unknown key in failure (known: error, exit, signal, ranks, "
		 "within_s, survivors, hang_s)"},
		/* hang (issue 14) */
		{TWO "job: {program: nccl, timeout_s: 10}\nexpect: {failure: {hang: 10s}}",
		 "t.yaml:3:26: hang: 10 s is not below the job's timeout_s (10)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {hang_s: 5, exit: 1}}",
		 "t.yaml:3:37: exit: not with hang (a hang expects no rank to end: the launcher ends "
		 "them all at the hang's time)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {error: timeout, hang: 5s}}",
		 "t.yaml:3:27: error: not with hang (a hang expects no rank to end: the launcher ends "
		 "them all at the hang's time)"},
		{TWO "job: {program: nccl}\nexpect: {failure: {hang: 50ms}}",
		 "t.yaml:3:26: hang: '50ms' is not a time in 100ms..86400s"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[SCN_ERR_LEN];
		struct scenario *sc = NULL;
		const char *y = cases[i].yaml;
		int rc = scn_load_buffer("t.yaml", y, strlen(y), &sc, err, sizeof(err));
		CHECK(rc == -EINVAL && !sc && !strcmp(err, cases[i].err),
		      "case %zu: rc %d\n%s\n got  %s\n want %s", i, rc, y, err, cases[i].err);
		scenario_free(sc);
	}
}

static const struct check_case cases[] = {
	CHECK_CASE(test_resolve),
	CHECK_CASE(test_errors),
};

CHECK_MAIN(cases)
