# Issue 34, deliverable 3: DOT and trace that hold up, one makespan (included from tests/CMakeLists.txt inside the
# `if(TARGET tessera)` block; EXPECT_EXIT and CLI_DIR come from there).
add_test(NAME cli.dot_graphviz COMMAND ${CLI_DIR}/dot_graphviz $<TARGET_FILE:tessera> ${CLI_DIR}
         ${CMAKE_CURRENT_BINARY_DIR}/cli-dot-graphviz)
set_tests_properties(cli.dot_graphviz PROPERTIES LABELS "unit;cli" TIMEOUT 300 SKIP_RETURN_CODE 77)
# The edge between the two splits of quoted-names-graph.json with y2 pinned to gpu1: y (32 x 8 f32 = 1.00 KiB) copied,
# its name escaped.
add_test(NAME cli.dot_split_edges COMMAND ${EXPECT_EXIT} 0
         --output-contains "n0 -> n1 [lhead=cluster_1, style=dashed, label=\"y \\\"mm\\\" \\\\n\\n1.00 KiB\"];"
         -- $<TARGET_FILE:tessera> dot -g ${CLI_DIR}/quoted-names-graph.json -t 2gpu-unequal --pin "y2\\=gpu1")
# dot --by split / --by layer against the plan's split count and the full view's (layer, backend) pairs, and the split
# view by default above 500 nodes (tests/cli/dot_views).
add_test(NAME cli.dot_views COMMAND ${CLI_DIR}/dot_views $<TARGET_FILE:tessera>)
add_test(NAME cli.trace_not_written_when_planning_fails COMMAND ${CLI_DIR}/trace_not_written 1
         ${CMAKE_CURRENT_BINARY_DIR}/cli-trace-nofit.json --
         $<TARGET_FILE:tessera> trace -m 70b -t 1gpu --metadata -o ${CMAKE_CURRENT_BINARY_DIR}/cli-trace-nofit.json)
add_test(NAME cli.trace_not_written_to_a_bad_path COMMAND ${CLI_DIR}/trace_not_written 2
         ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/t.json --
         $<TARGET_FILE:tessera> trace -o ${CMAKE_CURRENT_BINARY_DIR}/no-such-dir/t.json)
add_test(NAME cli.makespan_modes COMMAND ${CLI_DIR}/makespan_modes $<TARGET_FILE:tessera>)
# Issue 46: the trace of a pipelined prompt on eight GPUs shows gpu0's next ubatch overlapping gpu1's (0 of 3 with the
# mutant own-exec-user-input-waits-previous-split applied).
add_test(NAME cli.trace_shows_the_overlap COMMAND ${CLI_DIR}/trace_overlap $<TARGET_FILE:tessera>
         ${CMAKE_CURRENT_BINARY_DIR}/cli-trace-overlap.json)
set_tests_properties(cli.dot_split_edges cli.dot_views cli.trace_not_written_when_planning_fails
                     cli.trace_not_written_to_a_bad_path
                     cli.makespan_modes cli.trace_shows_the_overlap PROPERTIES LABELS "unit;cli" TIMEOUT 120)
