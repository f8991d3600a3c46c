#!/bin/sh
# deps.sh [--build] - what the build and the tests need, on Debian or Ubuntu.
# Without arguments it installs what is missing: as root with apt-get, otherwise it prints the
# one command to run and fails. --build checks only what compiling needs (a C compiler,
# libevent, libyaml), installs nothing, and says what to install: `make` runs it first.
# Libraries are looked up with pkg-config ($PKG_CONFIG), or by compiling their header with $CC
# where there is no pkg-config.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
missing=""

need() { # need PACKAGE TEST-COMMAND...
	pkg=$1
	shift
	"$@" >/dev/null 2>&1 || missing="$missing $pkg"
}

have_lib() { # have_lib PKG-CONFIG-NAME HEADER
	if command -v "$PKG_CONFIG" >/dev/null 2>&1; then
		"$PKG_CONFIG" --exists "$1"
	else
		printf '#include <%s>\n' "$2" | $CC -E -x c - >/dev/null 2>&1
	fi
}

need gcc command -v "${CC%% *}"
need libevent-dev have_lib libevent_core event2/event.h
need libyaml-dev have_lib yaml-0.1 yaml.h

if [ "${1:-}" = --build ]; then
	[ -z "$missing" ] && exit 0
	echo "simfabric: cannot build: missing the Debian/Ubuntu package(s)$missing" >&2
	echo "simfabric: install them with:  sudo apt-get install -y$missing   (or, as root: make deps)" >&2
	exit 1
fi

need make command -v make
need pkg-config command -v "$PKG_CONFIG"
need python3 test -x "$PYTHON"
need python3-pytest "$PYTHON" -c 'import pytest'
need binutils command -v nm
# cross-host channels (plugin/ofi.c loads libfabric at run time; its tests need the headers)
need libfabric-dev have_lib libfabric rdma/fabric.h

[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q $missing >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get install -y -q $missing; } || {
		echo "deps: apt-get install$missing failed" >&2
		exit 1
	}
	exit 0
fi
echo "deps: missing:$missing" >&2
echo "deps: install them with:  sudo apt-get install -y$missing" >&2
exit 1
