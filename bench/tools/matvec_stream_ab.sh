#!/bin/bash
# Builds and runs bench/tools/matvec_stream_ab.cpp: variant A is the AVX-512 table of the Release build in
# build/rel (cmake --preset rel or scripts/bench), variant B the same table source (or VARIANT_SRC, a modified copy
# of backends/cpu/kernels/opt/table_avx512.cpp kept beside its .inc files) compiled with VARIANT_FLAGS.
#   VARIANT_FLAGS="-DTESSERA_VNNI_PF=12288" bench/tools/matvec_stream_ab.sh 20 q4_0
# Arguments go to the program: [iterations] [q4_0|q8_0] [per_matrix] [divA] [divB] [minA] [minB].
set -euo pipefail
source "$(dirname "$0")/ab_build.sh" matvec_stream_ab
flags+=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c)
# shellcheck disable=SC2086
g++ "${flags[@]}" -w ${VARIANT_FLAGS:-} -Dtable_avx512=table_avx512_b \
    -c "${VARIANT_SRC:-$root/backends/cpu/kernels/opt/table_avx512.cpp}" -o "$out/b.o"
g++ "${flags[@]}" -Wall -Wextra -Wno-maybe-uninitialized -c "$root/bench/tools/matvec_stream_ab.cpp" -o "$out/main.o"
g++ "$out/main.o" "$out/b.o" "$build/libtessera_cpu.a" "$build/libtessera_core.a" -lpthread -o "$out/matvec_stream_ab"
"$out/matvec_stream_ab" "$@"
