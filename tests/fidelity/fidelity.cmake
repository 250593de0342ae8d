# The fidelity suite (issue 31, deliverable 5; docs/compare-log.md "The fidelity suite"): one test per log of
# tests/fidelity/, `tessera compare-log LOG` with the log's own options from tests/fidelity/expected.txt, label
# fidelity. Each test passes when compare-log exits 0 (no predicted figure off by more than the log's tolerance) and its
# summary says how many figures it predicted (so a prediction that goes missing fails too). Included from
# tests/CMakeLists.txt where the tool and the GGUF fixtures exist (a log may use a fixture with -m @FIXTURES@/NAME.gguf).
set(FIDELITY_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fidelity)
file(STRINGS ${FIDELITY_DIR}/expected.txt FIDELITY_LINES)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${FIDELITY_DIR}/expected.txt)
file(GLOB FIDELITY_LOGS RELATIVE ${FIDELITY_DIR} CONFIGURE_DEPENDS ${FIDELITY_DIR}/*.log)
set(FIDELITY_LISTED "")
foreach(line IN LISTS FIDELITY_LINES)
  if(line MATCHES "^#" OR line STREQUAL "")
    continue()
  endif()
  string(REPLACE "@FIXTURES@" "${TESSERA_FIXTURES_DIR}" line "${line}")
  separate_arguments(words UNIX_COMMAND "${line}")
  list(POP_FRONT words log predicted)
  list(APPEND FIDELITY_LISTED ${log})
  string(REGEX REPLACE "^([0-9]+)-.*" "\\1" number "${log}")
  add_test(NAME fidelity.${number} COMMAND ${EXPECT_EXIT} 0
           --output-contains " ${predicted} predicted, 0 off by more than the tolerance"
           -- $<TARGET_FILE:tessera> compare-log ${FIDELITY_DIR}/${log} ${words})
  set_tests_properties(fidelity.${number} PROPERTIES LABELS fidelity TIMEOUT 60 FIXTURES_REQUIRED gguf_fixtures)
endforeach()
# Every log has its line (a new log without one is a configure error, not a log left out silently).
foreach(log IN LISTS FIDELITY_LOGS)
  if(NOT log IN_LIST FIDELITY_LISTED)
    message(FATAL_ERROR "tests/fidelity/${log} has no line in tests/fidelity/expected.txt")
  endif()
endforeach()
