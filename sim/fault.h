/* SPDX-License-Identifier: MIT */
/*
 * fault.h - the scenario's fault timeline (faults:), resolved.
 */
#ifndef SF_FAULT_H
#define SF_FAULT_H

struct fault_plan;

/* NULL-safe. */
void fault_plan_free(struct fault_plan *p);
/* The same for fabric_set_faults. */
void fault_plan_free_v(void *p);

#endif /* SF_FAULT_H */
