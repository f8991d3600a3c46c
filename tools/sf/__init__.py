# SPDX-License-Identifier: MIT
"""sf - simfabric's Python package: what the CLI (tools/simfabric), the launcher, the report and
the pytest plugin are made of.

  paths   where the programs, the plugin and the CLI are (a checkout or an install): Paths
  daemon  one simfabricd process of our own, started, waited for and stopped: Daemon
  ctl     the control protocol's client (docs/control-protocol.md)
  model   the fabric model's expectations, as the C model computes them
  launch  ranks as emulated nodes, scenarios' jobs and their expect: checks
  report  charts and a summary of a run directory
  trace   merging the plugin's and the daemon's traces
  demo    `make demo` / `simfabric demo`

Installed by `make install` into <prefix>/lib/simfabric/python/sf (docs/install.md). The old
module names (sfctl, sflaunch, sfmodel, sfreport, sftrace, sfdemo) are kept beside it as aliases
of these modules, for scripts and tests that import them.
"""
