/* SPDX-License-Identifier: MIT */
/*
 * state.c - the harness's process-wide state (harness.h): the options, this
 * process's place in the world, the shared results page and the flows. Here,
 * below every other file, so that the test files and the helpers read them
 * without depending on main.c, which calls them all.
 */
#include "tools/harness/harness.h"

struct hx_opts hx_opt;
struct hx_world hx_w;
struct hx_shared *hx_shm;
struct hx_flow hx_flows[HX_MAX_FLOWS];
int hx_nflows, hx_nphases;
