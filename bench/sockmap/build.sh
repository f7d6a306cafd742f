#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/sockmap/build.sh OUTDIR: the sockmap column's programs, OUTDIR/sockmap.bpf.o
# (clang -target bpf) and OUTDIR/sockmap (its loader, libbpf); says why not
# and exits 1 when clang or libbpf is missing (the column is then skipped).
set -eu
out=${1:?usage: build.sh OUTDIR}
here=$(dirname "$0")
mkdir -p "$out"
command -v clang >/dev/null || { echo "sockmap: no clang" >&2; exit 1; }
[ -e /usr/include/bpf/libbpf.h ] || { echo "sockmap: no libbpf (libbpf-dev)" >&2; exit 1; }
arch=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
clang -O2 -g -target bpf -I"/usr/include/$arch" -c "$here/sockmap.bpf.c" -o "$out/sockmap.bpf.o"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$out/sockmap" "$here/sockmap.c" -lbpf
