#!/bin/sh
# SPDX-License-Identifier: MIT
# carry-libfabric.sh DIR - copy this machine's libfabric.so.1 and the libraries it needs (all but
# the C library's own) into DIR, so that a build carried to a machine without libfabric (the GPU
# machine) can make connections between hosts: the launcher adds DIR to the ranks'
# LD_LIBRARY_PATH where libfabric.so.1 cannot be loaded otherwise (docs/scale-out.md, section 3).
# Without libfabric here it does nothing and says so; exit 0 either way (the plugin loads
# libfabric at run time and fails a cross-host connect with the reason when it is missing).
set -eu
dir=$1
lib=$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libfabric\.so\.1 (.*x86-64.*) => //p' |
	head -n 1)
[ -n "$lib" ] || lib=$(ls /usr/lib/*/libfabric.so.1 /usr/lib64/libfabric.so.1 2>/dev/null | head -n 1)
if [ -z "$lib" ]; then
	echo "  CARRY   no libfabric.so.1 here: $dir not made (cross-host connections need it)"
	exit 0
fi
mkdir -p "$dir"
cp -L "$lib" "$dir/libfabric.so.1"
# what it links, less the C library's parts, which every machine has
ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
	while read -r name path; do
		case $name in
		libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
		*) cp -L "$path" "$dir/$name" ;;
		esac
	done
echo "  CARRY   $lib and $(($(ls "$dir" | wc -l) - 1)) librar(ies) it needs into $dir"
