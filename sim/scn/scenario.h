/* SPDX-License-Identifier: MIT */
/*
 * scenario.h - scenario files (YAML) to a scenario: a resolved fabric, its fault plan and
 * its job.
 *
 * A scenario is one YAML document: a mapping with the sections
 *   name, description   free text (name defaults to the file's base name)
 *   seed                the models' random seed (default 1)
 *   fabric              required: what the fabric is (schema: scenarios/README.md)
 *   faults              the fault timeline (sim/scn/faults.c, sim/core/fault.h)
 *   job, expect         what `simfabric run` launches and checks (sim/scn/job.c)
 *   placement           which host runs which node, on several hosts (sim/scn/place.c)
 * Any other top-level key is an error. Everything is validated at load,
 * before anything is built into the fabric the caller gets: a scenario
 * either loads completely or not at all.
 *
 * Errors are "file:line:column: key: reason", line and column 1-based,
 * pointing at the offending key or value, key the parameter or section
 * name, the reason naming the bad value. Only the first error is reported.
 *
 * libyaml's document loader does the YAML; the walk over its tree has a
 * fixed depth (the schema's), so aliases cannot make it recurse or loop.
 */
#ifndef SF_SCENARIO_H
#define SF_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>

#include "sim/scn/fabric.h"

#define SCN_ERR_LEN 768
#define SCN_FILE_MAX (16u << 20) /* bytes */

struct fault_plan;
struct place_map;

/*
 * A loaded scenario. It owns everything it points to (scenario_free), and is
 * read-only once loaded except for the fabric's seed (and the ideal fabric's
 * nodes, which come and go). Single-threaded, like the fabric.
 */
struct scenario {
	struct fabric *fabric;	   /* finished; never NULL */
	struct fault_plan *faults; /* the faults: timeline (sim/core/fault.h); NULL: none */
	/* job:, expect: and faults: resolved by their parsers (sim/scn/job.c, faults.c) to
	 * JSON texts, NULL when absent; the dump carries them, so tools read them from it
	 * instead of parsing the scenario again */
	char *job_json, *expect_json, *faults_json;
	/* placement: its rules (sim/scn/place.h) and their JSON; NULL when absent */
	struct place_map *placement;
	char *placement_json;
	/* where nodes and links are on --hosts H hosts (scenario_place); NULL until then */
	char *hosts_json;
};

/*
 * A scenario of f alone, without faults, job or expect (the daemon's ideal
 * fabric). Takes f over, also when it fails: 0 or -ENOMEM.
 */
int scenario_new(struct fabric *f, struct scenario **out);
/* Frees the scenario, its fabric, plan and texts. NULL-safe. */
void scenario_free(struct scenario *sc);
/*
 * The scenario as op=fabric's one line of JSON: the fabric's dump (fabric_json)
 * with "job", "expect" and "faults" after its config (null when absent), then
 * "placement" (the section's rules) and "hosts" (scenario_place's), each only
 * when there is one. The text is cached; refresh rebuilds it (the ideal fabric
 * grows). 0 or -ENOMEM.
 */
int scenario_json(struct scenario *sc, bool refresh, const char **text, size_t *len);

/*
 * Place the fabric's nodes and links on nhosts hosts (place_compute, with the
 * scenario's placement: rules) and keep the result for the dump's "hosts" (call
 * scenario_json with refresh then). 0, or place_compute's error.
 */
int scenario_place(struct scenario *sc, int nhosts, char *err, size_t errlen);

/*
 * Read, parse, validate and resolve the scenario at path into a new scenario
 * (free it with scenario_free). 0; -EINVAL with "file:line:column: key:
 * reason" in err; a negative errno from reading the file with "file:
 * reason"; -EFBIG over SCN_FILE_MAX; -ENOMEM.
 */
int scn_load(const char *path, struct scenario **out, char *err, size_t errlen);
/* The same from memory; file is the name used in messages and kept as the fabric's scenario. */
int scn_load_buffer(const char *file, const char *data, size_t len, struct scenario **out,
		    char *err, size_t errlen);

/*
 * A faults: list alone (YAML text: a sequence of faults, or a mapping with a
 * faults: key), checked against a loaded fabric: what `simfabric fault apply`
 * sends. *out is a new plan (fault_plan_free). Errors as scn_load's.
 */
int scn_load_faults(struct fabric *f, const char *file, const char *data, size_t len,
		    struct fault_plan **out, char *err, size_t errlen);

/* A plan as a JSON array (malloc'd; NULL: out of memory), names from the fabric (faults.c). */
char *fault_plan_json(const struct fault_plan *p, const struct fabric *f);

#endif /* SF_SCENARIO_H */
