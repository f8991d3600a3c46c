#!/bin/sh
# deps.sh - install what the build and the tests need, on Debian or Ubuntu.
# As root it runs apt-get; otherwise it prints the one command to run and fails.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
missing=""

need() { # need PACKAGE TEST-COMMAND...
	pkg=$1
	shift
	"$@" >/dev/null 2>&1 || missing="$missing $pkg"
}

need gcc command -v cc
need make command -v make
need pkg-config command -v pkg-config
need libevent-dev pkg-config --exists libevent_core
need libyaml-dev pkg-config --exists yaml-0.1
need python3 test -x "$PYTHON"
need python3-pytest "$PYTHON" -c 'import pytest'
need binutils command -v nm

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
