/* SPDX-License-Identifier: MIT */
/*
 * version.h - simfabric's one version, for every program and the plugin: simfabricd,
 * simfabric-harness, simfabric-nccljob and the plugin's init line print it, and the CLI reads it
 * from here (tools/simfabric, `simfabric --version`). Bump it here only.
 */
#ifndef SF_VERSION_H
#define SF_VERSION_H

#define SF_VERSION "0.1.0"

#endif /* SF_VERSION_H */
