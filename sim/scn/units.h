/* SPDX-License-Identifier: MIT */
/* units.h - the parser of values with units lives in sim/core/units.h (header-only, libc
 * only); this name stays for the scenario compiler's includes. */
#include "sim/core/units.h"
