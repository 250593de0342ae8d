# Issue 50, item 7: every table the tool prints keeps within 80 columns by default, and --wide gives the fixed
# columns of before (docs/scenarios.md "Tables and --wide"). Included from tests/CMakeLists.txt inside the
# `if(TARGET tessera)` block; EXPECT_EXIT and CLI_DIR come from there. Each width test names its table by its first
# line and the line after it (expect_exit --table FROM TO) and picks a case that made it wider than 80 before: long
# sizes (MiB with two decimals in every column), several GPUs, an overflow, a long error inside the table.
set(WIDTH "--max-line-width;80")
# The device table and llama.cpp's buffers of the 70B on two GPUs and the CPU (five buffers, 82 and 88 columns
# before); the splits-cause block of the same plan, whose option does not plan (a 180-character error, wrapped).
add_test(NAME cli.width.device_table COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^device +layers" "^$"
         -- $<TARGET_FILE:tessera> plan -m 70b -t 2gpu-unequal --tokens 32 --layers-per-device 51,16)
add_test(NAME cli.width.llama_buffers COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^buffer +memory" "^graph nodes"
         -- $<TARGET_FILE:tessera> plan -m 70b -t 2gpu-unequal --tokens 32 --layers-per-device 51,16)
add_test(NAME cli.width.split_causes COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^why 159 splits" "^$"
         --output-contains "with -ngl all (no --layers-per-device): does not plan:"
         -- $<TARGET_FILE:tessera> plan -m 70b -t 2gpu-unequal --tokens 32 --layers-per-device 51,16)
# run's per-device times (86 columns before) and a failing scenario's device table (repro).
add_test(NAME cli.width.run_devices COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^device +busy" "^makespan:"
         -- $<TARGET_FILE:tessera> run -m tiny -t 2gpu-unequal)
add_test(NAME cli.width.repro_report COMMAND ${EXPECT_EXIT} 1 ${WIDTH} --table "^device +layers" "^split 0"
         -- $<TARGET_FILE:tessera> repro ${CLI_DIR}/failing-scenario.json)
# fit's GPU table: llama.cpp's fit (83 columns before); a fit that fails (-ngl all: nothing left for it to change)
# and --strict, both GPUs short of their margin (113 columns before: the shortfall after each row; now a line after the
# table, or the overflow lines of --strict).
add_test(NAME cli.width.fit_devices COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^device +buffer" "^$"
         -- $<TARGET_FILE:tessera> fit -m 70b -t 2gpu-unequal)
add_test(NAME cli.width.fit_short COMMAND ${EXPECT_EXIT} 1 ${WIDTH} --table "^device +buffer" "^$"
         --stdout-has-line "short of the margin: gpu0 5615 MiB, gpu1 2203 MiB"
         -- $<TARGET_FILE:tessera> fit -m 70b -t 2gpu-unequal -ngl all)
add_test(NAME cli.width.fit_strict COMMAND ${EXPECT_EXIT} 1 ${WIDTH} --table "^device +buffer" "^$"
         -- $<TARGET_FILE:tessera> fit -m 70b -t 2gpu-unequal --strict)
# The extra models' table with an overflow (the projector's 7.42 MiB on a GPU of 100 KiB).
add_test(NAME cli.width.extra_models COMMAND ${EXPECT_EXIT} 1 ${WIDTH} --table "^device +main" "^(overflow|the extra)"
         --output-contains "OVERFLOW"
         -- $<TARGET_FILE:tessera> plan --gpu 100KiB --gpu 8GiB --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf)
# topologies (245 columns before): every line.
add_test(NAME cli.width.topologies COMMAND ${EXPECT_EXIT} 0 ${WIDTH} -- $<TARGET_FILE:tessera> topologies)
# compare-log's comparison: figures predicted (112 columns before) and not predicted with their reason (463).
add_test(NAME cli.width.compare_log COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^printed vs predicted" "figures printed"
         -- $<TARGET_FILE:tessera> compare-log ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare-log-synthetic.log)
add_test(NAME cli.width.compare_log_not_predicted COMMAND ${EXPECT_EXIT} 1 ${WIDTH}
         --table "^printed vs predicted" "figures printed"
         -- $<TARGET_FILE:tessera> compare-log
            ${CMAKE_CURRENT_SOURCE_DIR}/fidelity/19-qwen3moe-235b-ik-llama-2gpu-fa-q8kv.log)
set_tests_properties(cli.width.device_table cli.width.llama_buffers cli.width.split_causes cli.width.run_devices
                     cli.width.repro_report cli.width.fit_devices cli.width.fit_short cli.width.fit_strict cli.width.extra_models
                     cli.width.topologies cli.width.compare_log cli.width.compare_log_not_predicted
                     PROPERTIES LABELS "unit;cli" TIMEOUT 120)

# --wide: the fixed columns, byte for byte as before (the golden files are the reports of before the 80-column
# layout), and the lines of the other tables as they were.
add_test(NAME cli.wide.plan COMMAND ${EXPECT_EXIT} 0 --stdout-golden ${CLI_DIR}/golden/plan-tiny-1gpu-wide.txt
         -- $<TARGET_FILE:tessera> plan --wide --no-speed)  # (the speed: cli.plan_speed)
add_test(NAME cli.wide.topologies COMMAND ${EXPECT_EXIT} 0 --stdout-golden ${CLI_DIR}/golden/topologies-wide.txt
         -- $<TARGET_FILE:tessera> topologies --wide)
add_test(NAME cli.wide.run COMMAND ${EXPECT_EXIT} 0
         --stdout-has-line "device      busy (us)   compute (us)     bytes in    bytes out  commands"
         --stdout-has-line "gpu0            2    50.75 KiB    16.00 KiB    15.50 KiB    82.75 KiB    24.00 GiB"
         -- $<TARGET_FILE:tessera> run -m tiny -t 2gpu-unequal --wide)
add_test(NAME cli.wide.fit_strict COMMAND ${EXPECT_EXIT} 1
         --stdout-has-line "device     buffer       free     margin      model      other       used       left"
         --output-contains "  -4590 MiB  (5615 MiB short of the margin)"
         -- $<TARGET_FILE:tessera> fit -m 70b -t 2gpu-unequal --strict --wide)
add_test(NAME cli.wide.compare_log COMMAND ${EXPECT_EXIT} 0
         --output-contains "  model          CUDA0              5.31 MiB predicted         5.31 MiB diff      -0.00"
         -- $<TARGET_FILE:tessera> compare-log ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare-log-synthetic.log --wide)
add_test(NAME cli.wide.repro_report COMMAND ${EXPECT_EXIT} 1
         --stdout-has-line "device     layers      weights     kv cache      compute         peak     capacity"
         -- $<TARGET_FILE:tessera> repro ${CLI_DIR}/failing-scenario.json --wide)
add_test(NAME cli.wide.extra_models COMMAND ${EXPECT_EXIT} 1
         --stdout-has-line "device             main        draft       mmproj        total  allocatable"
         --stdout-has-line "gpu0          42.75 KiB          0 B     7.42 MiB     7.47 MiB   100.00 KiB  OVERFLOW"
         -- $<TARGET_FILE:tessera> plan --gpu 100KiB --gpu 8GiB --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf --wide)
set_tests_properties(cli.wide.plan cli.wide.topologies cli.wide.run cli.wide.fit_strict cli.wide.compare_log
                     cli.wide.repro_report cli.wide.extra_models PROPERTIES LABELS "unit;cli" TIMEOUT 120)

# inspect's three tables on a real model's header (metadata keys of 41 characters, tensor rows of 84 before).
if(TARGET tessera_make_fixtures)
  set(WIDTH_QWEN3_30B ${CMAKE_BINARY_DIR}/fixtures/qwen3-30b-a3b-q4_k_m.gguf)
  add_test(NAME cli.width.inspect COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^metadata:" "^$"
           --table "^tensors by layer:" "^$" --table "^totals by type:" "^$"
           -- $<TARGET_FILE:tessera> inspect ${WIDTH_QWEN3_30B})
  add_test(NAME cli.wide.inspect COMMAND ${EXPECT_EXIT} 0
           --stdout-has-line "  qwen3moe.attention.layer_norm_rms_epsilon    f32      9.99999997e-07"
           --stdout-has-line "    blk.0.ffn_down_exps.weight           q6_k    [768, 2048, 128]         157.50 MiB"
           -- $<TARGET_FILE:tessera> inspect ${WIDTH_QWEN3_30B} --wide)
  # The user's case of issue 50 (Qwen3-30B-A3B, experts on the CPU, two GPUs): the device table, the buffers and
  # fit's table within 80 columns.
  add_test(NAME cli.width.qwen3_plan COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^device +layers" "^$"
           --table "^buffer +memory" "^graph nodes" --table "^why " "^$"
           -- $<TARGET_FILE:tessera> plan -m ${WIDTH_QWEN3_30B} -t ${CLI_DIR}/rig-24-16.json -c 32768 -ot exps=CPU)
  add_test(NAME cli.width.qwen3_fit COMMAND ${EXPECT_EXIT} 0 ${WIDTH} --table "^device +buffer" "^$"
           -- $<TARGET_FILE:tessera> fit -m ${WIDTH_QWEN3_30B} -t ${CLI_DIR}/rig-24-16.json -c 32768)
  set_tests_properties(cli.width.inspect cli.wide.inspect cli.width.qwen3_plan cli.width.qwen3_fit PROPERTIES
                       LABELS "unit;cli" TIMEOUT 120 FIXTURES_REQUIRED gguf_fixtures)
endif()
