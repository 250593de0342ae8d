# Sourced by the A/B tool scripts (gemm_ab.sh, matvec_stream_ab.sh): sets root (the repository), build (the Release
# tree, BUILD_DIR or build/rel, whose libraries must exist), out (a temporary directory removed on exit) and flags
# (the common compile flags). $1: the tool's name, for messages.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build/rel}
for lib in libtessera_cpu.a libtessera_core.a; do
  [[ -f $build/$lib ]] || { echo "$1: $build/$lib not found (build the Release tree first)" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-O3 -DNDEBUG -std=c++20 -I"$root/src" -I"$root/backends/cpu" -I"$root/backends/cpu/kernels")
