#!/bin/sh
# SPDX-License-Identifier: MIT
# nccl-libdir.sh - print the directories that hold NCCL's and the CUDA runtime's shared
# libraries, colon-separated, for LD_LIBRARY_PATH:
#
#     LD_LIBRARY_PATH=$(tools/scripts/nccl-libdir.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
#         build/simfabric-nccljob ...
#
# usage: tools/scripts/nccl-libdir.sh [-v] [BINARY]
#   BINARY  take the sonames to look for from its DT_NEEDED entries (readelf or objdump);
#           default: libnccl.so.2 and libcudart.so.13 (override with NCCLJOB_SONAMES)
#   -v      say on stderr where each library was found
# Looks, in this order, in $NCCL_HOME/lib and lib64, $CUDA_HOME/lib64 (default
# /usr/local/cuda), the wheels nvidia-nccl-cu* and nvidia-cuda-runtime* of ${PYTHON:-python3}
# (every directory of the `nvidia` namespace package, e.g. nvidia/nccl/lib, nvidia/cu13/lib,
# nvidia/cuda_runtime/lib), then `ldconfig -p`. The first match of each soname wins.
# Exit status: 0 all found; 1 one is missing (what was found is still printed; the missing
# ones are named on stderr); 2 usage.
set -u

verbose=0
binary=
for a in "$@"; do
	case $a in
	-v) verbose=1 ;;
	-h | --help) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "nccl-libdir.sh: unknown option '$a'" >&2; exit 2 ;;
	*) binary=$a ;;
	esac
done

sonames=${NCCLJOB_SONAMES:-"libnccl.so.2 libcudart.so.13"}
if [ -n "$binary" ]; then
	if [ ! -r "$binary" ]; then
		echo "nccl-libdir.sh: cannot read $binary" >&2
		exit 2
	fi
	# readelf: "(NEEDED)  Shared library: [libnccl.so.2]"; objdump: "NEEDED  libnccl.so.2"
	needed=$( (readelf -d "$binary" 2>/dev/null || objdump -p "$binary" 2>/dev/null) |
		grep NEEDED | sed -e 's/.*\[\(.*\)\].*/\1/' -e 's/.*NEEDED[[:space:]]*//' |
		grep -E '^lib(nccl|cudart)\.so')
	[ -n "$needed" ] && sonames=$needed
fi

py=${PYTHON:-python3}
# the nvidia namespace package's directories, and the named packages' own
pydirs=$("$py" - 2>/dev/null <<'EOF'
import importlib, os
seen = []
for name in ("nvidia", "nvidia.nccl", "nvidia.cuda_runtime", "nvidia.cu13", "nvidia.cu12"):
    try:
        m = importlib.import_module(name)
    except Exception:
        continue
    for p in list(getattr(m, "__path__", [])) + [os.path.dirname(getattr(m, "__file__", "") or "")]:
        if p and os.path.isdir(p) and p not in seen:
            seen.append(p)
print("\n".join(seen))
EOF
)

# candidate directories, in order; one per line
candidates() {
	if [ -n "${NCCL_HOME:-}" ]; then
		echo "$NCCL_HOME/lib"
		echo "$NCCL_HOME/lib64"
	fi
	echo "${CUDA_HOME:-/usr/local/cuda}/lib64"
	printf '%s\n' "$pydirs" | while IFS= read -r d; do
		[ -n "$d" ] || continue
		echo "$d/lib"
		find "$d" -maxdepth 3 -type d -name lib 2>/dev/null
	done
}

nl='
'
out=
missing=
for so in $sonames; do
	found=
	IFS=$nl
	dirs=$(candidates)
	for d in $dirs; do
		if [ -e "$d/$so" ]; then
			found=$d
			break
		fi
	done
	unset IFS
	if [ -z "$found" ] && command -v ldconfig >/dev/null 2>&1; then
		f=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so { print $NF; exit }')
		[ -n "$f" ] && found=$(dirname "$f")
	fi
	if [ -z "$found" ]; then
		missing="$missing $so"
		continue
	fi
	[ "$verbose" = 1 ] && echo "nccl-libdir.sh: $so in $found" >&2
	case ":$out:" in
	*":$found:"*) ;;
	*) out=${out:+$out:}$found ;;
	esac
done

echo "$out"
if [ -n "$missing" ]; then
	echo "nccl-libdir.sh: not found:$missing (looked in \$NCCL_HOME, ${CUDA_HOME:-/usr/local/cuda}/lib64," \
		"the nvidia-* wheels of $py, ldconfig -p)" >&2
	exit 1
fi
exit 0
