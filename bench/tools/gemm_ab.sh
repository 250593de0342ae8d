#!/bin/bash
# Builds and runs bench/tools/gemm_ab.cpp: variant A is the f32 GEMM of the Release build in build/rel (cmake
# --preset rel or scripts/bench), variant B backends/cpu/kernels/opt/opt_matmul.cpp (or VARIANT_SRC, a modified copy
# kept beside it) compiled again with VARIANT_FLAGS and its entry points renamed. For example, the row claims before
# session 14 (at least 256 rows, 1/16 of what is left) against today's:
#   VARIANT_FLAGS="-DTESSERA_GEMM_MIN_CLAIM_ROWS=256 -DTESSERA_GEMM_SHARE_DIV=8" bench/tools/gemm_ab.sh 20 1024
# Arguments go to the program: [iterations] [n] [threads].
set -euo pipefail
source "$(dirname "$0")/ab_build.sh" gemm_ab
rename=()
for f in run_mul_mat supports_mul_mat work_size_mul_mat run_mul_mat_id supports_mul_mat_id work_size_mul_mat_id; do
  rename+=("-D$f=${f}_b")
done
# shellcheck disable=SC2086
g++ "${flags[@]}" -w ${VARIANT_FLAGS:-} "${rename[@]}" \
    -c "${VARIANT_SRC:-$root/backends/cpu/kernels/opt/opt_matmul.cpp}" -o "$out/b.o"
g++ "${flags[@]}" -Wall -Wextra -c "$root/bench/tools/gemm_ab.cpp" -o "$out/main.o"
g++ "$out/main.o" "$out/b.o" "$build/libtessera_cpu.a" "$build/libtessera_core.a" -lpthread -o "$out/gemm_ab"
"$out/gemm_ab" "$@"
