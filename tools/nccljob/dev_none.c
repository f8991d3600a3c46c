/* SPDX-License-Identifier: MIT */
/*
 * dev_none.c - the device layer of a simfabric-nccljob built without CUDA and NCCL (the
 * Makefile links it instead of dev.c where they are missing): --dry-run works as everywhere,
 * so the data checks, the bootstrap and the failure handling are tested on any machine;
 * anything that needs a GPU fails at set-up, saying why.
 */
#include "tools/nccljob/nccljob.h"

static int no_device(struct nj_job *j, struct nj_fail *f)
{
	job_failf(j, f, NJ_SETUP, "built-without-cuda",
		  "this simfabric-nccljob was built without CUDA and NCCL: only --dry-run runs "
		  "(build where CUDA's runtime and NCCL are found, or set CUDA_HOME/NCCL_HOME)");
	return -1;
}

void dev_versions(struct nj_job *j)
{
	j->nccl_version = j->cuda_runtime = j->cuda_driver = 0;
}

int dev_setup(struct nj_job *j, struct nj_fail *f)
{
	return no_device(j, f);
}

int dev_unique_id(struct nj_job *j, uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	(void)id;
	return no_device(j, f);
}

int dev_comm_init(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	(void)id;
	return no_device(j, f);
}

int dev_upload(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	(void)bytes;
	return no_device(j, f);
}

int dev_poison(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	(void)bytes;
	return no_device(j, f);
}

int dev_run(struct nj_job *j, const struct nj_step *s, int iters, int each,
	    const struct nj_late *late, double *us, double *each_us, struct nj_fail *f)
{
	(void)s, (void)iters, (void)each, (void)late, (void)us, (void)each_us;
	return no_device(j, f);
}

int dev_download(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	(void)bytes;
	return no_device(j, f);
}

int dev_flip(struct nj_job *j, size_t i, struct nj_fail *f)
{
	(void)i;
	return no_device(j, f);
}

void dev_abort(struct nj_job *j)
{
	(void)j;
}

int dev_shrink(struct nj_job *j, int *excl, int nexcl, struct nj_fail *f)
{
	(void)excl, (void)nexcl;
	return no_device(j, f);
}

int dev_reinit(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	(void)id;
	return no_device(j, f);
}

int dev_finalize(struct nj_job *j, struct nj_fail *f)
{
	(void)j, (void)f;
	return 0;
}
