#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script: the environment gives $CC, $CXX, $CXXFLAGS (sanitizer and coverage
# instrumentation), $LIB_FUZZING_ENGINE and $OUT. Builds only the fuzz targets (no tests, examples or benchmarks) and
# puts next to each binary its dictionary and its seed corpus (NAME.dict, NAME_seed_corpus.zip).
cmake -S "$SRC/tessera" -B "$WORK/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DTESSERA_FUZZ=ON -DTESSERA_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" -DTESSERA_SANITIZE=OFF \
  -DTESSERA_CUDA=OFF -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_BENCH=OFF
targets=(topology_parser scenario_parser graph_parser planner end_to_end gguf_reader)
cmake --build "$WORK/build" --target "${targets[@]/#/tessera_fuzz_}"
for name in "${targets[@]}"; do
  cp "$WORK/build/fuzz/tessera_fuzz_$name" "$OUT/"
  (cd "$SRC/tessera/fuzz/corpus/$name" && zip -q -r "$OUT/tessera_fuzz_${name}_seed_corpus.zip" .)
done
cp "$SRC/tessera/fuzz/dict/topology.dict" "$OUT/tessera_fuzz_topology_parser.dict"
cp "$SRC/tessera/fuzz/dict/scenario.dict" "$OUT/tessera_fuzz_scenario_parser.dict"
cp "$SRC/tessera/fuzz/dict/graph.dict" "$OUT/tessera_fuzz_graph_parser.dict"
cp "$SRC/tessera/fuzz/dict/gguf.dict" "$OUT/tessera_fuzz_gguf_reader.dict"
