/* SPDX-License-Identifier: MIT */
/*
 * job.c - the scenario's job: and expect: sections. See scn_int.h.
 * (Placeholder until the launcher lands: both sections are refused.)
 */
#include "sim/scn_int.h"

int scn_parse_job(struct scn *s, const yaml_node_t *v)
{
	return scn_fail(s, v, "job", "not supported yet");
}

int scn_parse_expect(struct scn *s, const yaml_node_t *v)
{
	return scn_fail(s, v, "expect", "not supported yet");
}
