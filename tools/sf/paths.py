# SPDX-License-Identifier: MIT
"""sf.paths - where simfabric's parts are: the one Paths (programs, plugin, CLI, scripts), for
a checkout's build/ or the tree `make install` wrote (docs/install.md); and the launcher's
errors and exit statuses, which Paths.require raises."""
import os

PKG = os.path.dirname(os.path.realpath(__file__))
# tools/ in a checkout; <prefix>/lib/simfabric/python where `make install` put this package
TOOLS = os.path.dirname(PKG)
ROOT = os.path.dirname(TOOLS)  # the checkout (installed: <prefix>/lib/simfabric)

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_CANNOT = 0, 1, 2, 77
EXIT_TIMEOUT = 124


class LaunchError(Exception):
    """The job cannot start: status is the CLI's exit status for it."""

    def __init__(self, msg, status=EXIT_USAGE):
        super().__init__(msg)
        self.status = status


def installed_layout():
    """{"bindir", "libdir"} of the tree `make install` put these modules in, or None in a checkout.
    Installed, they sit in <prefix>/lib/simfabric/python beside the sfinstall.py it writes (the
    install's LIBDIR, relative to the prefix); the prefix is found from this file's place, so a
    tree staged under DESTDIR or moved whole keeps working."""
    if not os.path.exists(os.path.join(TOOLS, "sfinstall.py")):
        return None
    import sfinstall
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(TOOLS)))
    return {"bindir": os.path.realpath(os.path.join(prefix, "bin")),
            "libdir": os.path.realpath(os.path.join(prefix, sfinstall.LIBDIR))}


class Paths:
    """The programs, the plugin and the CLI. build_dir (default $SIMFABRIC_BUILD, else the
    checkout's build/) holds the programs and the plugin as `make` leaves them.

    From an installed tree (installed_layout(), docs/install.md) the default build_dir is
    <prefix>/bin, and that directory's plugin is in the install's LIBDIR; the CLI is
    <prefix>/bin/simfabric there, tools/simfabric in a checkout."""

    def __init__(self, build_dir=None):
        inst = installed_layout()
        self.build = os.path.realpath(build_dir or os.environ.get("SIMFABRIC_BUILD") or
                                      (inst["bindir"] if inst else os.path.join(ROOT, "build")))
        libdir = inst["libdir"] if inst and self.build == inst["bindir"] else self.build
        self.daemon = os.environ.get("SIMFABRICD") or os.path.join(self.build, "simfabricd")
        self.plugin = os.path.join(libdir, "libnccl-net-simfabric.so")
        self.harness = os.path.join(self.build, "simfabric-harness")
        self.nccljob = os.path.join(self.build, "simfabric-nccljob")
        self.cli = os.path.join(inst["bindir"] if inst else TOOLS, "simfabric")
        self.torchjob = os.path.join(TOOLS, "torch_collectives.py")
        self.libdir_sh = os.path.join(TOOLS, "scripts", "nccl-libdir.sh")

    def require(self, *paths):
        for p in paths:
            if not os.path.exists(p):
                raise LaunchError("%s is missing: build it with `make`" % p, EXIT_CANNOT)
