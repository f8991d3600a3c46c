/* SPDX-License-Identifier: MIT */
/* fault.c - the fault timeline. See fault.h. (Placeholder.) */
#include "sim/fault.h"

#include <stdlib.h>

#include "sim/scn_int.h"

struct fault_plan {
	int n;
};

void fault_plan_free(struct fault_plan *p)
{
	free(p);
}

void fault_plan_free_v(void *p)
{
	fault_plan_free(p);
}

int scn_parse_faults(struct scn *s, const yaml_node_t *v)
{
	return scn_fail(s, v, "faults", "not supported yet");
}
