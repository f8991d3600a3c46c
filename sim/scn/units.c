/* SPDX-License-Identifier: MIT */
/* units.c - the daemon's (and the scenario compiler's) copy of the one parser of values with
 * units, which is header-only in sim/core/units.h so that the harness and the NCCL job
 * program can take it too. */
#define SF_UNITS_IMPLEMENTATION
#include "sim/core/units.h"
