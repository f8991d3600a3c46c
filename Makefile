# simfabric: one plain Makefile. Respects CC, CFLAGS, LDFLAGS, PREFIX, DESTDIR; V=1 shows commands.
#   make            build the plugin, the daemon and the tools into build/
#   make test       install what is missing, build, run the C unit tests (ASan) and the pytest suite
#   make test-stress  the pytest suite with a CPU hog on every core (STRESS_RUNS=5 for five runs)
#   make demo       install what is missing, build, run a benchmark and a fault over two fabrics
#   make bench      the side-by-side benchmark (ideal fabric, 2 processes)
#   make asan       the same binaries under AddressSanitizer+UBSan, in build-asan/
#   make fuzz       libFuzzer harnesses for the parsers (clang), run for FUZZ_SECONDS each
#   make install    into $(DESTDIR)$(PREFIX) (LIBDIR for the libraries; docs/install.md)
#   make uninstall  removes what make install installed
PREFIX ?= /usr/local
CC ?= cc
CFLAGS ?= -O2 -g
PYTHON ?= /usr/bin/python3
PKG_CONFIG ?= pkg-config
B ?= build
FUZZ_SECONDS ?= 20

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla -Wformat=2 \
	-Wno-unused-parameter
EVENT_CFLAGS := $(shell $(PKG_CONFIG) --cflags libevent_core 2>/dev/null)
EVENT_LIBS := $(shell $(PKG_CONFIG) --libs libevent_core 2>/dev/null || echo -levent_core)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -I. $(WARN) $(CFLAGS) -MMD -MP
LIBS := -lpthread -ldl
# libyaml is linked statically: the GPU machine has no libyaml, and the daemon must run there.
YAML_A := $(firstword $(wildcard $(shell $(PKG_CONFIG) --variable=libdir yaml-0.1 2>/dev/null)/libyaml.a \
	/usr/lib/x86_64-linux-gnu/libyaml.a /usr/lib/libyaml.a))
YAML_LIBS := $(if $(YAML_A),$(YAML_A),-lyaml)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# sim/ in three layers, each using only those below it: sim/core/ (what the plugin links: the
# models, the fabric state, the data path, the control protocol), sim/scn/ (the scenario
# compiler, libyaml) and sim/ itself (the daemon, libevent).
CORE_SRC := $(wildcard sim/core/*.c)
SCN_SRC := $(wildcard sim/scn/*.c)
SIM_LIB_SRC := $(CORE_SRC) $(SCN_SRC) $(filter-out sim/simfabricd.c,$(wildcard sim/*.c))
PLUGIN_SRC := $(wildcard plugin/*.c) $(CORE_SRC)
HARNESS_SRC := $(wildcard tools/harness/*.c)
UNIT_SRC := $(wildcard sim/test/test_*.c)
# The plugin's own unit tests include the file they test (its statics are the point).
PLUGIN_UNIT_SRC := $(wildcard plugin/test/test_*.c)
FUZZ_SRC := $(wildcard sim/fuzz/fuzz_*.c)

PLUGIN := $(B)/libnccl-net-simfabric.so
DAEMON := $(B)/simfabricd
HARNESS := $(B)/simfabric-harness
# A minimal NCCL profiler plugin for tests: checks the plugin's net events (tools/profcheck/profcheck.c)
PROFCHECK := $(B)/libnccl-profiler-simfabric-check.so
UNITS := $(UNIT_SRC:sim/test/%.c=$(B)/test/%) $(PLUGIN_UNIT_SRC:plugin/test/%.c=$(B)/test/%)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
pic = $(patsubst %.c,$(B)/pic/%.o,$(1))

.PHONY: ptx all plugin sim tools units carry test check unit pytest asan fuzz soak bench demo deps depcheck \
	install clean symbols format format-check test-stress
# Nothing built is a throw-away intermediate: make never deletes an object it made (no `rm` line
# after a build, and the next build does not compile the unit tests' objects again).
.SECONDARY:
all: plugin sim tools units carry
plugin: $(PLUGIN)
sim: $(DAEMON)
tools: $(HARNESS) $(PROFCHECK)
units: $(UNITS)
# libfabric and what it links, for a build carried to a machine without it (the GPU machine):
# the launcher uses $(B)/lib/fabric only where libfabric.so.1 cannot be loaded otherwise.
carry: $(B)/lib/fabric/.carried
$(B)/lib/fabric/.carried: tools/scripts/carry-libfabric.sh
	$(Q)tools/scripts/carry-libfabric.sh $(B)/lib/fabric
	@# stamped only once carried: a build made before libfabric was installed carries it next time
	@if [ -e $(B)/lib/fabric/libfabric.so.1 ]; then touch $@; fi

# Before compiling anything: is what the build needs here? If not, say which Debian packages to
# install (tools/scripts/deps.sh --build) instead of failing on a missing header.
depcheck:
	$(Q)CC="$(CC)" PKG_CONFIG="$(PKG_CONFIG)" tools/scripts/deps.sh --build

$(B)/obj/%.o: %.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(EVENT_CFLAGS) -c $< -o $@

$(B)/pic/%.o: %.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC [so] $<")
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(PLUGIN): $(call pic,$(PLUGIN_SRC))
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs -Wl,-z,now -o $@ $^ $(LIBS) -lm

$(PROFCHECK): $(call pic,tools/profcheck/profcheck.c)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs -Wl,-z,now -o $@ $^ -lpthread

$(DAEMON): $(call obj,sim/simfabricd.c $(SIM_LIB_SRC))
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(YAML_LIBS) $(LIBS) -lm

# The harness knows the plugin only through the ABI (plugin/ncclnet.h): it links nothing of sim/.
$(HARNESS): $(call obj,$(HARNESS_SRC))
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS) -lm

$(B)/test/%: $(B)/obj/sim/test/%.o $(call obj,$(SIM_LIB_SRC))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(YAML_LIBS) $(LIBS) -lm

$(B)/test/%: $(B)/obj/plugin/test/%.o $(call obj,$(SIM_LIB_SRC))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(YAML_LIBS) $(LIBS) -lm

# A fault-injected build for the "never early" monitor's tests: sim/core/chan.c with
# CHAN_INJECT_EARLY=1, whose receives skip the model's gate on purpose. The monitor must count
# what that lets through (sim/test/test_early.c; test_09_11 over the plugin built with it).
INJECT := $(B)/inject
INJECT_PLUGIN := $(INJECT)/libnccl-net-simfabric.so
tools: $(INJECT_PLUGIN)

$(INJECT)/pic/sim/core/chan.o: sim/core/chan.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC [so] $< (injected: early)")
	$(Q)$(CC) $(ALL_CFLAGS) -DCHAN_INJECT_EARLY=1 -fPIC -fvisibility=hidden -c $< -o $@

$(INJECT)/obj/sim/core/chan.o: sim/core/chan.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (injected: early)")
	$(Q)$(CC) $(ALL_CFLAGS) -DCHAN_INJECT_EARLY=1 -c $< -o $@

$(INJECT_PLUGIN): $(INJECT)/pic/sim/core/chan.o $(call pic,$(filter-out sim/core/chan.c,$(PLUGIN_SRC)))
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs -Wl,-z,now -o $@ $^ $(LIBS) -lm

# test_chan_race: the same build's hook plays a peer that rewrites the region between a check
# and its use (red-team finding 12).
$(B)/test/test_early $(B)/test/test_chan_race: $(B)/test/%: $(B)/obj/sim/test/%.o \
		$(INJECT)/obj/sim/core/chan.o $(call obj,$(filter-out sim/core/chan.c,$(SIM_LIB_SRC)))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(YAML_LIBS) $(LIBS) -lm

# Only the ncclNetPlugin_v8..v12 data symbols may be exported.
symbols: $(PLUGIN)
	$(Q)tools/scripts/check-symbols.sh $(PLUGIN)

deps:
	$(Q)tools/scripts/deps.sh

unit: units
	$(Q)set -e; for t in $(UNITS); do echo "  UNIT    $$t"; $$t; done

asan:
	$(Q)$(MAKE) --no-print-directory B=build-asan \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" all

# The C unit tests run once, under ASan: `make asan` builds them into build-asan/test/ and
# pytests/test_05_unit.py runs them (`make unit` runs build/'s by hand).
test check: deps
	@echo "== make test 1/4: build (build/)"
	$(Q)$(MAKE) --no-print-directory all
	@echo "== make test 2/4: the same under ASan and UBSan (build-asan/)"
	$(Q)$(MAKE) --no-print-directory asan
	@echo "== make test 3/4: the exported symbols, the format"
	$(Q)$(MAKE) --no-print-directory symbols format-check
	@echo "== make test 4/4: the pytest suite (the C unit tests run in it, under ASan)"
	$(Q)cd pytests && $(PYTHON) -m pytest $(PYTEST_ARGS)

pytest: all
	$(Q)cd pytests && $(PYTHON) -m pytest $(PYTEST_ARGS)

# The suite as a loaded CI machine sees it: a CPU hog on every core, STRESS_RUNS runs in a row
# (stops at the first failure). The hogs are this recipe's children, killed by pid at the end.
STRESS_RUNS ?= 1
test-stress: all
	$(Q)pids=; for i in $$(seq $$(nproc)); do sh -c 'while :; do :; done' & pids="$$pids $$!"; \
	done; trap 'kill $$pids' EXIT INT TERM; echo "  STRESS  $$(nproc) CPU hog(s):$$pids"; \
	for r in $$(seq $(STRESS_RUNS)); do echo "  STRESS  run $$r of $(STRESS_RUNS)"; \
		(cd pytests && $(PYTHON) -m pytest $(PYTEST_ARGS)) || exit 1; done

bench: deps all
	$(Q)rc=0; $(PYTHON) tools/bench/bench.py --build $(B) || rc=1; echo; \
		$(PYTHON) tools/bench/bench_models.py --build $(B) || rc=1; echo; \
		$(PYTHON) tools/bench/bench_xhost.py --build $(B) || rc=1; echo; \
		$(PYTHON) tools/bench/bench_nccl.py --build-dir $(B) || rc=1; exit $$rc

# One screen: the build's lines go to $(B)/demo/build.log (tools/sf/demo.py; installed, it is
# `simfabric demo`).
demo: deps
	$(Q)$(PYTHON) tools/sfdemo.py --build $(B) --make $(MAKE)

fuzz:
	$(Q)tools/scripts/fuzz.sh $(FUZZ_SECONDS)

# The randomized fault soak (tools/scripts/soak.py): SOAK_MESSAGES under delay-only faults,
# 2-8 ranks, a seed per iteration from SOAK_SEED. Minutes, so not in `make test` (test_33 runs
# 10^4 messages of it).
SOAK_MESSAGES ?= 1000000
SOAK_SEED ?= 1
soak: all
	$(Q)$(PYTHON) tools/scripts/soak.py --build $(B) --messages $(SOAK_MESSAGES) --seed $(SOAK_SEED) \
		--require-hits

# ---- install and uninstall (docs/install.md says what goes where) ------------------------------
# LIBDIR takes the libraries (lib/x86_64-linux-gnu on a multiarch system). The Python modules go
# to $(PREFIX)/lib/simfabric/python whatever LIBDIR is (the package sf/, with the old module
# names beside it): bin/simfabric finds them from its own place, and sf.paths finds the programs
# and LIBDIR from theirs (sfinstall.py, written here).
LIBDIR ?= $(PREFIX)/lib
BINDIR := $(PREFIX)/bin
SF_PYDIR := $(PREFIX)/lib/simfabric/python
SF_SCENARIODIR := $(PREFIX)/share/simfabric/scenarios
SF_INCLUDEDIR := $(PREFIX)/include/simfabric
MAN1DIR := $(PREFIX)/share/man/man1
COMPLETIONDIR := $(PREFIX)/share/bash-completion/completions
PKGCONFIGDIR := $(LIBDIR)/pkgconfig
INSTALL ?= install

# What each directory gets; uninstall removes these names and nothing else.
INST_BIN := $(DAEMON) $(HARNESS)
INST_LIB := $(PLUGIN) $(PROFCHECK)
INST_PY := $(wildcard tools/*.py) pytests/simfabric_pytest.py
INST_PYPKG := $(wildcard tools/sf/*.py)
INST_SCENARIOS := $(wildcard scenarios/*.yaml) scenarios/README.md
MAN1 := $(B)/man/simfabric.1 $(B)/man/simfabricd.1 $(B)/man/simfabric-harness.1
COMPLETION := $(B)/completion/simfabric
INST_FILES := $(addprefix $(BINDIR)/,$(notdir $(INST_BIN)) simfabric simfabric-nccljob) \
	$(addprefix $(LIBDIR)/,$(notdir $(INST_LIB))) \
	$(addprefix $(SF_PYDIR)/,$(notdir $(INST_PY)) sfinstall.py sfpyhook/sitecustomize.py \
		scripts/nccl-libdir.sh) $(addprefix $(SF_PYDIR)/sf/,$(notdir $(INST_PYPKG))) \
	$(addprefix $(SF_SCENARIODIR)/,$(notdir $(INST_SCENARIOS))) $(SF_INCLUDEDIR)/ncclnet.h \
	$(addprefix $(MAN1DIR)/,$(notdir $(MAN1))) $(COMPLETIONDIR)/simfabric \
	$(PKGCONFIGDIR)/simfabric.pc
# Directories that are simfabric's alone, innermost first: uninstall removes them when empty.
INST_OWN_DIRS := $(SF_PYDIR)/sf $(SF_PYDIR)/sfpyhook $(SF_PYDIR)/scripts $(SF_PYDIR) \
	$(PREFIX)/lib/simfabric \
	$(SF_SCENARIODIR) $(PREFIX)/share/simfabric $(SF_INCLUDEDIR)
SF_VERSION = $(shell sed -n 's/.*SF_VERSION "\(.*\)".*/\1/p' sim/core/version.h)

.PHONY: man completion uninstall
man: $(MAN1)
completion: $(COMPLETION)
all: man completion

# Man pages are the programs' --help (tools/scripts/mkman.py; help2man is not a dependency).
MKMAN = $(PYTHON) tools/scripts/mkman.py --version $(SF_VERSION) --out $@
$(B)/man/simfabric.1: tools/simfabric $(wildcard tools/*.py tools/sf/*.py) tools/scripts/mkman.py \
		sim/core/version.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MAN     $@")
	$(Q)$(MKMAN) --name simfabric --see-also simfabricd simfabric-harness \
		--summary "run NCCL jobs as emulated nodes over a modelled fabric on one machine" \
		-- $(PYTHON) tools/simfabric
$(B)/man/simfabricd.1: $(DAEMON) tools/scripts/mkman.py
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MAN     $@")
	$(Q)$(MKMAN) --name simfabricd --see-also simfabric simfabric-harness \
		--summary "the simfabric fabric daemon: rendezvous, shared memory, models and faults" \
		-- $(DAEMON)
$(B)/man/simfabric-harness.1: $(HARNESS) tools/scripts/mkman.py
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MAN     $@")
	$(Q)$(MKMAN) --name simfabric-harness --see-also simfabric simfabricd \
		--summary "drive any NCCL net plugin the way NCCL's proxy does, without NCCL or a GPU" \
		-- $(HARNESS)

# A static bash completion from the CLI's parser (argcomplete is not on every machine).
$(COMPLETION): tools/simfabric $(wildcard tools/*.py tools/sf/*.py) tools/scripts/mkcompletion.py
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(PYTHON) tools/scripts/mkcompletion.py tools/simfabric $@

install: all
	$(INSTALL) -d $(addprefix $(DESTDIR),$(BINDIR) $(LIBDIR) $(SF_PYDIR)/sf $(SF_PYDIR)/sfpyhook \
		$(SF_PYDIR)/scripts $(SF_SCENARIODIR) $(SF_INCLUDEDIR) $(MAN1DIR) $(COMPLETIONDIR) \
		$(PKGCONFIGDIR))
	$(INSTALL) -m 0755 $(INST_BIN) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0755 tools/simfabric $(DESTDIR)$(BINDIR)/simfabric
	@# the NCCL job program only where it was built (it needs CUDA and NCCL)
	if [ -e $(NCCLJOB) ]; then $(INSTALL) -m 0755 $(NCCLJOB) $(DESTDIR)$(BINDIR)/; fi
	$(INSTALL) -m 0755 $(INST_LIB) $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 0644 $(INST_PY) $(DESTDIR)$(SF_PYDIR)/
	$(INSTALL) -m 0644 $(INST_PYPKG) $(DESTDIR)$(SF_PYDIR)/sf/
	$(INSTALL) -m 0644 tools/sfpyhook/sitecustomize.py $(DESTDIR)$(SF_PYDIR)/sfpyhook/
	$(INSTALL) -m 0755 tools/scripts/nccl-libdir.sh $(DESTDIR)$(SF_PYDIR)/scripts/
	printf '# Written by make install: the version, and LIBDIR relative to the prefix.\n%s\n%s\n' \
		'VERSION = "$(SF_VERSION)"' 'LIBDIR = "$(patsubst $(PREFIX)/%,%,$(LIBDIR))"' \
		> $(DESTDIR)$(SF_PYDIR)/sfinstall.py
	chmod 0644 $(DESTDIR)$(SF_PYDIR)/sfinstall.py
	$(INSTALL) -m 0644 $(INST_SCENARIOS) $(DESTDIR)$(SF_SCENARIODIR)/
	$(INSTALL) -m 0644 plugin/ncclnet.h $(DESTDIR)$(SF_INCLUDEDIR)/
	$(INSTALL) -m 0644 $(MAN1) $(DESTDIR)$(MAN1DIR)/
	$(INSTALL) -m 0644 $(COMPLETION) $(DESTDIR)$(COMPLETIONDIR)/simfabric
	@# pkg-config: the header's -I, and where the plugin is (NCCL dlopens it: no Libs)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))' \
		'includedir=$${prefix}/include' 'plugindir=$${libdir}' \
		'plugin=$${libdir}/$(notdir $(PLUGIN))' \
		'scenariodir=$${prefix}/share/simfabric/scenarios' '' 'Name: simfabric' \
		'Description: emulated network fabric for NCCL: the net plugin ABI header (ncclnet.h) and the plugin' \
		'Version: $(SF_VERSION)' 'Cflags: -I$${includedir}/simfabric' \
		> $(DESTDIR)$(PKGCONFIGDIR)/simfabric.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/simfabric.pc

# The Python caches are the installed modules' own (written when they first run).
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INST_FILES))
	rm -rf $(addprefix $(DESTDIR),$(SF_PYDIR)/__pycache__ $(SF_PYDIR)/sf/__pycache__ \
		$(SF_PYDIR)/sfpyhook/__pycache__)
	for d in $(addprefix $(DESTDIR),$(INST_OWN_DIRS)); do \
		if [ -d "$$d" ]; then rmdir "$$d" || exit 1; fi; done

# A Debian package of the install (docs/install.md): PREFIX=/usr, the plugin in the multiarch
# library directory, dpkg-deb (no debhelper). DEB is the file, DEB_ROOT its staging tree.
DEB_ARCH = $(shell dpkg --print-architecture 2>/dev/null)
DEB_MULTIARCH = $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || $(CC) -print-multiarch)
DEB_MAINTAINER ?= simfabric maintainers <simfabric@localhost>
DEB ?= $(B)/simfabric_$(SF_VERSION)_$(DEB_ARCH).deb
DEB_ROOT ?= $(B)/deb-root
.PHONY: deb
deb: all
	@command -v dpkg-deb >/dev/null || { echo "make deb: needs dpkg-deb (Debian's dpkg)"; exit 2; }
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_ROOT)) PREFIX=/usr \
		LIBDIR=/usr/lib/$(DEB_MULTIARCH)
	mkdir -p $(DEB_ROOT)/DEBIAN
	printf '%s\n' 'Package: simfabric' 'Version: $(SF_VERSION)' 'Architecture: $(DEB_ARCH)' \
		'Maintainer: $(DEB_MAINTAINER)' 'Section: devel' 'Priority: optional' \
		'Depends: libc6, libevent-core-2.1-7, python3' \
		'Recommends: python3-pytest, python3-matplotlib' \
		'Description: emulated network fabric for multi-node NCCL jobs on one machine' \
		' An NCCL net plugin, the simfabricd daemon and the simfabric CLI: real NCCL jobs run' \
		' as emulated nodes over a modelled fabric with faults; simfabric-harness tests any' \
		' NCCL net plugin without NCCL or a GPU.' > $(DEB_ROOT)/DEBIAN/control
	echo 'activate-noawait ldconfig' > $(DEB_ROOT)/DEBIAN/triggers
	dpkg-deb --root-owner-group --build $(DEB_ROOT) $(DEB)

# .clang-format describes the house style (kernel braces, tabs, 100 columns). FORMAT_CLEAN lists
# the files that already match it to the byte; format-check keeps them so, and a file joins the
# list once it is formatted (`clang-format -i FILE`, in a commit of its own). `make format`
# formats them all.
FORMAT_SRC := $(shell git ls-files '*.[ch]' 2>/dev/null)
FORMAT_CLEAN := docs/examples/buggy-plugin.c tools/bench/copy_rate.c \
	tools/bench/test/fake_libcuda.c plugin/client.h plugin/net.h plugin/plog.h \
	plugin/plugin.c plugin/prof.c plugin/trace.h sim/core/jsonw.h \
	sim/core/fstate_fault.c sim/core/fstate_int.h sim/dlist.h sim/fabmon.c sim/fabmon.h sim/log.c \
	sim/log.h sim/sock.c sim/sock.h sim/srv_int.h \
	sim/srv.c sim/srv_conn.c sim/srv_fault.c sim/srv_reg.c sim/srv_session.c sim/shm.c sim/shm.h \
	sim/srv_look.c sim/mpskill.c sim/mpskill.h sim/test/test_mpskill.c tools/harness/json.c tools/harness/state.c tools/nccljob/job.c \
	tools/nccljob/wait.c tools/profcheck/ncclprof.h \
	plugin/agent.c plugin/agent.h plugin/cudadrv.c plugin/cudadrv.h plugin/gpu.c plugin/gpu.h \
	plugin/gpu_int.h plugin/gpu_base.c plugin/gpu_copy.c plugin/gpu_issue.c plugin/gpu_kern.c plugin/gpu_share.c \
	plugin/test/check_cudadrv.c plugin/test/test_gpu_export.c sim/test/test_chan_direct.c \
	plugin/ncclenv.c plugin/ncclenv.h plugin/test/test_ncclenv.c \
	sim/scn/units.c sim/scn/units.h sim/core/units.h sim/test/test_units.c sim/fuzz/fuzz_units.c \
	sim/test/test_fault_proc.c tools/harness/launched.c tools/harness/landing.c sim/test/fspec.h sim/test/mfix.h \
	sim/core/chan_int.h sim/core/chan_shm.c sim/core/chan_watch.c sim/core/model_int.h \
	sim/scn/fabric_int.h sim/fuzz/fuzz_err.h tools/common/sendall.h \
	sim/core/xnet.h sim/core/xchan.h sim/core/xchan.c sim/test/xnet_fake.h sim/test/test_xchan.c \
	plugin/ofi.h plugin/ofi.c plugin/test/test_ofi.c plugin/xhost.h plugin/xhost.c \
	sim/fuzz/fuzz_xchan.c sim/fuzz/fuzz_input.h \
	sim/scn/place.c sim/scn/place.h sim/test/test_place.c \
	sim/test/test_chan_race.c sim/core/xmodel.h sim/core/xmodel.c sim/test/test_xmodel.c \
	sim/srv_xroute.c plugin/xroute.h plugin/xroute.c sim/fuzz/fuzz_xmodel.c
# The small-copy kernel's PTX (plugin/copier_ptx.h) from plugin/copier.cu: run after changing
# the kernel, and commit both. The plugin builds without nvcc; only this target needs it.
ptx:
	tools/scripts/mkptx.sh $(CUDA_HOME)/bin/nvcc plugin/copier.cu plugin/copier_ptx.h

format:
	clang-format -i $(FORMAT_SRC)

format-check:
	$(Q)if command -v clang-format >/dev/null 2>&1; then \
		clang-format --dry-run -Werror $(FORMAT_CLEAN); \
	else echo "  SKIP    format-check: no clang-format"; fi

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(B) build-asan -name '*.d' 2>/dev/null)

# ---- simfabric-nccljob: the NCCL job program (tools/nccljob/*.c) -------------
# Built when CUDA's runtime and NCCL are found; otherwise `make` says why and goes on.
# NCCL_HOME defaults to CUDA_HOME (NCCL installed into the CUDA tree). The program links
# against the sonames (libnccl.so.2, libcudart.so.N), with a runpath to CUDA_HOME's and
# NCCL_HOME's library directories; LD_LIBRARY_PATH wins over it (tools/scripts/nccl-libdir.sh
# prints the directories to put there, e.g. NCCL from the nvidia-nccl-cu13 wheel).
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?= $(CUDA_HOME)
NCCLJOB := $(B)/simfabric-nccljob
NCCLJOB_SRC := $(filter-out tools/nccljob/dev_none.c,$(wildcard tools/nccljob/*.c))
NCCLJOB_CUDA_LIBDIR := $(CUDA_HOME)/lib64
NCCLJOB_NCCL_LIBDIR := $(firstword $(foreach d,$(NCCL_HOME)/lib64 $(NCCL_HOME)/lib,\
	$(if $(wildcard $(d)/libnccl.so $(d)/libnccl.so.2),$(d))))
# -lX when the unversioned link exists, else the soname file itself
nccljob_lib = $(if $(wildcard $(1)/lib$(2).so),-l$(2),$(if $(wildcard $(1)/lib$(2).so.*),\
	-l:$(notdir $(firstword $(wildcard $(1)/lib$(2).so.*)))))
NCCLJOB_LIBS := $(call nccljob_lib,$(NCCLJOB_NCCL_LIBDIR),nccl) \
	$(call nccljob_lib,$(NCCLJOB_CUDA_LIBDIR),cudart)
NCCLJOB_MISSING := $(strip \
	$(if $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),,$(CUDA_HOME)/include/cuda_runtime.h) \
	$(if $(wildcard $(NCCL_HOME)/include/nccl.h),,$(NCCL_HOME)/include/nccl.h) \
	$(if $(NCCLJOB_NCCL_LIBDIR),,$(NCCL_HOME)/lib64/libnccl.so*) \
	$(if $(call nccljob_lib,$(NCCLJOB_CUDA_LIBDIR),cudart),,$(NCCLJOB_CUDA_LIBDIR)/libcudart.so*))
NCCLJOB_CFLAGS := -isystem $(CUDA_HOME)/include -isystem $(NCCL_HOME)/include
nccljob_comma := ,
nccljob_space := $(subst ,, )
NCCLJOB_LDFLAGS := -L$(NCCLJOB_NCCL_LIBDIR) -L$(NCCLJOB_CUDA_LIBDIR) \
	-Wl,-rpath,$(NCCLJOB_CUDA_LIBDIR) $(if $(filter-out $(NCCLJOB_CUDA_LIBDIR),\
	$(NCCLJOB_NCCL_LIBDIR)),-Wl$(nccljob_comma)-rpath$(nccljob_comma)$(NCCLJOB_NCCL_LIBDIR))

# Our declarations of CUDA's driver ABI (plugin/cudadrv.h) against cuda.h, at compile time.
CUDADRV_CHECK := $(B)/check/check_cudadrv.o
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
all plugin: $(CUDADRV_CHECK)
endif
$(CUDADRV_CHECK): plugin/test/check_cudadrv.c plugin/cudadrv.h | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CHECK   plugin/cudadrv.h against $(CUDA_HOME)/include/cuda.h")
	$(Q)$(CC) $(ALL_CFLAGS) -isystem $(CUDA_HOME)/include -c $< -o $@

# simfabric-copy-rate (tools/bench/copy_rate.c): how many small copies a second the GPU runs
# from one process or several (docs/gpu-path.md, "Why LL is slow at 4 ranks"). It loads CUDA's
# driver when it runs, so it builds wherever cuda.h is, and says so where there is no driver.
# Its tests run it over a stand-in for the driver where there is no GPU
# (tools/bench/test/fake_libcuda.c, as build/test/fake-cuda/libcuda.so.1).
COPY_RATE := $(B)/simfabric-copy-rate
FAKE_CUDA := $(B)/test/fake-cuda/libcuda.so.1
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
all tools: $(COPY_RATE) $(FAKE_CUDA)
endif
.PHONY: copy-rate
copy-rate: $(COPY_RATE)
$(COPY_RATE): tools/bench/copy_rate.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -isystem $(CUDA_HOME)/include $(LDFLAGS) -o $@ $< -ldl
$(FAKE_CUDA): tools/bench/test/fake_libcuda.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -isystem $(CUDA_HOME)/include -fPIC -shared \
		-Wl,-soname,libcuda.so.1 $(LDFLAGS) -o $@ $<

.PHONY: nccljob
all tools: nccljob
nccljob: $(NCCLJOB)
ifneq ($(NCCLJOB_MISSING),)
# Without CUDA and NCCL the program is still built, with tools/nccljob/dev_none.c for its
# device layer: --dry-run (the data checks, the bootstrap, failure handling) runs anywhere,
# so its tests never skip on a plain CI machine; a real run fails at set-up saying why.
NCCLJOB_SRC := $(filter-out tools/nccljob/dev.c,$(NCCLJOB_SRC)) tools/nccljob/dev_none.c
NCCLJOB_CFLAGS :=
NCCLJOB_LDFLAGS :=
NCCLJOB_LIBS :=
$(NCCLJOB): | nccljob-note
.PHONY: nccljob-note
nccljob-note:
	@echo "  NOTE    $(NCCLJOB): --dry-run only: no CUDA runtime or NCCL (missing: $(subst $(nccljob_space),$(nccljob_comma) ,$(NCCLJOB_MISSING))); set CUDA_HOME or NCCL_HOME"
endif

$(B)/nccljob/%.o: %.c | depcheck
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(NCCLJOB_CFLAGS) -c $< -o $@

$(NCCLJOB): $(patsubst %.c,$(B)/nccljob/%.o,$(NCCLJOB_SRC))
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(NCCLJOB_LDFLAGS) $(NCCLJOB_LIBS) -lpthread -lm
