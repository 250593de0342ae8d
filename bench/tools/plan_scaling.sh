#!/bin/bash
# `tessera plan` time per node from about 1k to 1M nodes (issue 51: plan must stay linear). Runs
#   tessera plan -m tiny --layers L --metadata
# (the tiny preset: 32 nodes a layer, 4 more outside them; metadata-only; the whole report: the plan, the split-cause
# summary, which plans again per option, and llama.cpp's memory breakdown) for each L, REPEAT times, and prints the
# best wall time, the time per node and its ratio to the smallest size's. Flat means the ratios stay within 2.
# Usage: bench/tools/plan_scaling.sh [TESSERA] [REPEAT] [LAYERS...]
#   TESSERA  the binary (default build/default/tools/tessera/tessera); REPEAT default 3; LAYERS default 32 320 3200 31250
set -euo pipefail
bin="${1:-build/default/tools/tessera/tessera}"
repeat="${2:-3}"
shift $(( $# > 2 ? 2 : $# ))
layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(32 320 3200 31250)
[ -x "$bin" ] || { echo "plan_scaling: no tessera binary at $bin (build it first)" >&2; exit 2; }
printf '| layers | nodes | best wall s | us per node | x smallest |\n|---:|---:|---:|---:|---:|\n'
base=""
for l in "${layers[@]}"; do
  nodes=$(( l * 32 + 4 ))
  best=""
  for _ in $(seq "$repeat"); do
    t0=$(date +%s.%N)
    "$bin" plan -m tiny --layers "$l" --metadata >/dev/null 2>&1 || { echo "plan_scaling: plan failed at $l layers" >&2; exit 1; }
    t=$(echo "$(date +%s.%N) - $t0" | bc)
    if [ -z "$best" ] || (( $(echo "$t < $best" | bc) )); then best=$t; fi
  done
  per=$(echo "scale=4; $best * 1000000 / $nodes" | bc)
  [ -n "$base" ] || base=$per
  printf '| %d | %d | %.3f | %.3f | %.2f |\n' "$l" "$nodes" "$best" "$per" "$(echo "scale=4; $per / $base" | bc)"
done
