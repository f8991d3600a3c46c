#!/bin/sh
# check-symbols.sh LIB - the plugin must export exactly the ncclNetPlugin_v8..v12 data objects.
set -eu
lib=$1
got=$(nm -D --defined-only "$lib" | awk '{print $2 " " $3}' | sort)
want=$(printf 'D ncclNetPlugin_v%s\n' 10 11 12 8 9 | sort)
# Read-only data may show as R; accept D or R, but nothing else may be defined.
norm=$(printf '%s\n' "$got" | sed 's/^R /D /')
if [ "$norm" != "$want" ]; then
	echo "check-symbols: $lib exports the wrong set of symbols:" >&2
	printf '%s\n' "$got" >&2
	echo "check-symbols: expected exactly ncclNetPlugin_v8..v12 (data)" >&2
	exit 1
fi
echo "  SYMBOLS $lib: ncclNetPlugin_v8..v12 only"
