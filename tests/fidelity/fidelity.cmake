# The fidelity suite (issue 31, deliverable 5; docs/compare-log.md "The fidelity suite"): one test per log of
# tests/fidelity/, `tessera compare-log LOG` with the log's own options from tests/fidelity/expected.txt, label
# fidelity. Each test passes when compare-log exits 0 (no predicted figure off by more than the log's tolerance; 1 for a
# log of which nothing is predicted) and its summary says how many figures it predicted (so a prediction that goes
# missing fails too). Included from
# tests/CMakeLists.txt where the tool and the GGUF fixtures exist (a log may use a fixture with -m @FIXTURES@/NAME.gguf).
# tessera_fidelity_logs(DIR PREFIX): one test PREFIX.NN per log of DIR, with the log's line of DIR/expected.txt.
function(tessera_fidelity_logs dir prefix)
  file(STRINGS ${dir}/expected.txt lines)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${dir}/expected.txt)
  file(GLOB logs RELATIVE ${dir} CONFIGURE_DEPENDS ${dir}/*.log)
  set(listed "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^#" OR line STREQUAL "")
      continue()
    endif()
    string(REPLACE "@FIXTURES@" "${TESSERA_FIXTURES_DIR}" line "${line}")
    separate_arguments(words UNIX_COMMAND "${line}")
    list(POP_FRONT words log predicted)
    list(APPEND listed ${log})
    string(REGEX REPLACE "^([0-9]+)-.*" "\\1" number "${log}")
    # a log with nothing predicted exits 1 (no figure compared is no agreement; docs/compare-log.md)
    set(code 0)
    if(predicted EQUAL 0)
      set(code 1)
    endif()
    add_test(NAME ${prefix}.${number} COMMAND ${EXPECT_EXIT} ${code}
             --output-contains " ${predicted} predicted, 0 off by more than the tolerance"
             -- $<TARGET_FILE:tessera> compare-log ${dir}/${log} ${words})
    # (300 s: a log without metadata or -m has its model identified among the published ones, which plans a few of
    # them: under a second here, a minute under the sanitizers)
    set_tests_properties(${prefix}.${number} PROPERTIES LABELS fidelity TIMEOUT 300 FIXTURES_REQUIRED gguf_fixtures)
  endforeach()
  # Every log has its line (a new log without one is a configure error, not a log left out silently).
  foreach(log IN LISTS logs)
    if(NOT log IN_LIST listed)
      message(FATAL_ERROR "${dir}/${log} has no line in ${dir}/expected.txt")
    endif()
  endforeach()
endfunction()
set(FIDELITY_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fidelity)
tessera_fidelity_logs(${FIDELITY_DIR} fidelity)
# llama.cpp master's own logs on simulated CUDA GPUs (tests/side-by-side/README.md; issue 48)
tessera_fidelity_logs(${CMAKE_CURRENT_SOURCE_DIR}/side-by-side side-by-side)

# compare-log's exit codes with predictions (docs/compare-log.md): 1 when a figure is off (log 01 with the wrong
# model: Llama 3.1 8B's 4.58 GiB of tensors cannot be the 17691 MiB the log printed), 2 for a model file that cannot
# be read; and the synthetic log of tests/cli (every figure worked out by hand in
# tests/unit/llama/llama_log_predict_test.cpp) predicted within the default tolerances, text and --json (schema).
set(FIDELITY_01 ${FIDELITY_DIR}/01-qwen3moe-30b-a3b-partial-1gpu.log)
add_test(NAME cli.compare_log.off COMMAND ${EXPECT_EXIT} 1 --output-contains "2 predicted, 2 off by more than the tolerance"
         -- $<TARGET_FILE:tessera> compare-log ${FIDELITY_01} -m ${TESSERA_FIXTURES_DIR}/llama-3.1-8b-q4_k_m.gguf)
add_test(NAME cli.compare_log.bad_model COMMAND ${EXPECT_EXIT} 2 --output-contains "no-such-model.gguf"
         -- $<TARGET_FILE:tessera> compare-log ${FIDELITY_01} -m ${CMAKE_CURRENT_BINARY_DIR}/no-such-model.gguf)
add_test(NAME cli.compare_log.synthetic COMMAND ${EXPECT_EXIT} 0
         --output-contains "4 figures printed, 4 predicted, 0 off by more than the tolerance"
         --output-contains "  model CUDA0       5.31 MiB   5.31 MiB  -0.00    -0.00 %  ok    19"
         -- $<TARGET_FILE:tessera> compare-log ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare-log-synthetic.log)
# (a 2026 build at its default verbosity prints nothing to compare: the message says to run it with -lv 4)
add_test(NAME cli.compare_log.quiet_2026 COMMAND ${EXPECT_EXIT} 1 --output-contains "run it again with -lv 4 (or -v)"
         -- $<TARGET_FILE:tessera> compare-log ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare-log-quiet-2026.log)
set_tests_properties(cli.compare_log.quiet_2026 PROPERTIES LABELS "unit;cli" TIMEOUT 60)
tessera_json_schema_test(compare_log_predicted compare-log 0 compare-log --json
                         ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare-log-synthetic.log)
set_tests_properties(cli.compare_log.off cli.compare_log.bad_model cli.compare_log.synthetic
                     cli.json_schema.compare_log_predicted
                     PROPERTIES LABELS "unit;cli" TIMEOUT 300 FIXTURES_REQUIRED gguf_fixtures)
