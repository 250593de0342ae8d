# Issue 32, deliverable 4: a draft model and a projector beside the model (docs/extra-models.md). Included from
# tests/CMakeLists.txt inside the `if(TARGET tessera)` block; EXPECT_EXIT and CLI_DIR come from there.
# Bad flags and files exit 2 naming them.
add_test(NAME cli.extra.draft_missing_file COMMAND ${EXPECT_EXIT} 2 --output-contains "no-such-draft.gguf"
         -- $<TARGET_FILE:tessera> plan --draft ${CMAKE_CURRENT_BINARY_DIR}/no-such-draft.gguf)
add_test(NAME cli.extra.ngld_without_draft COMMAND ${EXPECT_EXIT} 2
         --output-contains "-ngld: a draft option without a draft model"
         -- $<TARGET_FILE:tessera> plan -ngld 4)
add_test(NAME cli.extra.mmproj_missing_file COMMAND ${EXPECT_EXIT} 2 --output-contains "--mmproj: "
         -- $<TARGET_FILE:tessera> plan -mm ${CMAKE_CURRENT_BINARY_DIR}/no-such-mmproj.gguf)
add_test(NAME cli.extra.no_offload_without_mmproj COMMAND ${EXPECT_EXIT} 2
         --output-contains "--no-mmproj-offload: without a projector"
         -- $<TARGET_FILE:tessera> plan --no-mmproj-offload)
# A clip header (tests/cli/mmproj-tiny-clip.gguf, 445 bytes written with Python's struct module from docs/gguf.md, the
# header of tests/unit/llama/extra_models_test.cpp's write_mmproj:
# image 224, patch 14, embedding 768, FFN 3072, 12 heads; v.patch_embd.weight [14, 14, 3, 768] and mm.0.weight
# [768, 896] f16): 2,279,424 B of weights = 2.17 MiB on CUDA0, compute 4 x 256 x (3072 + 3 x 768) = 5,505,024 B
# = 5.25 MiB.
add_test(NAME cli.extra.mmproj_llama_log COMMAND ${EXPECT_EXIT} 0
         --output-contains "alloc_compute_meta:      CUDA0 compute buffer size =     5.25 MiB"
         -- $<TARGET_FILE:tessera> plan --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf --llama-log)
add_test(NAME cli.extra.mmproj_on_cpu COMMAND ${EXPECT_EXIT} 0 --output-contains "clip_ctx: CLIP using CPU backend"
         -- $<TARGET_FILE:tessera> plan --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf --no-mmproj-offload --llama-log)
# fit leaves the projector's 2,279,424 + 5,505,024 B = 7.42 MiB free on gpu0 (extra_models_alone, reserve_extra_models).
add_test(NAME cli.extra.fit_reserves COMMAND ${EXPECT_EXIT} 0
         --output-contains "fit: the extra models (draft, projector) take gpu0 7.42 MiB"
         -- $<TARGET_FILE:tessera> fit -t 2gpu-unequal --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf)
tessera_json_schema_test(plan_mmproj plan 0 plan --json --mmproj ${CLI_DIR}/mmproj-tiny-clip.gguf)
set_tests_properties(cli.extra.draft_missing_file cli.extra.ngld_without_draft cli.extra.mmproj_missing_file
                     cli.extra.no_offload_without_mmproj cli.extra.mmproj_llama_log cli.extra.mmproj_on_cpu cli.extra.fit_reserves
                     cli.json_schema.plan_mmproj
                     PROPERTIES LABELS "unit;cli" TIMEOUT 120)

# On the fixtures (fixtures.make_all): a language model as the projector is refused; the 8B file as its own draft.
if(TARGET tessera_make_fixtures)
  set(EXTRA_LLAMA_8B ${CMAKE_BINARY_DIR}/fixtures/llama-3.1-8b-q4_k_m.gguf)
  add_test(NAME cli.extra.mmproj_not_clip COMMAND ${EXPECT_EXIT} 2
           --output-contains "general.architecture is \"llama\", not \"clip\""
           -- $<TARGET_FILE:tessera> plan -m ${EXTRA_LLAMA_8B} --mmproj ${EXTRA_LLAMA_8B})
  # The draft's KV at -cd 2048: 32 layers x (K + V) x 1024 x 2048 x 2 B = 256 MiB on CUDA0.
  add_test(NAME cli.extra.draft_llama_log COMMAND ${EXPECT_EXIT} 0
           --output-contains "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB"
           -- $<TARGET_FILE:tessera> plan -m ${EXTRA_LLAMA_8B} -t 1gpu -c 4096 -md ${EXTRA_LLAMA_8B} -cd 2048
              --llama-log)
  # The same file as its own draft on gpu1 alone (-devd gpu1) at -c 16384: its 2 GiB KV cache and 4.30 GiB of weights
  # do not fit in the 8 GiB gpu1 next to the main model's share of the layers there (docs/extra-models.md): exit 1.
  add_test(NAME cli.extra.draft_overflow COMMAND ${EXPECT_EXIT} 1
           --output-contains "overflow: gpu1 overflows because of the draft model"
           -- $<TARGET_FILE:tessera> plan -m ${EXTRA_LLAMA_8B} -t 2gpu-unequal -c 16384 -md ${EXTRA_LLAMA_8B} -devd gpu1)
  add_test(NAME cli.extra.draft_unknown_device COMMAND ${EXPECT_EXIT} 2
           --output-contains "-devd gpu9: no GPU of that name in the topology"
           -- $<TARGET_FILE:tessera> plan -m ${EXTRA_LLAMA_8B} -md ${EXTRA_LLAMA_8B} -devd gpu9)
  set_tests_properties(cli.extra.mmproj_not_clip cli.extra.draft_llama_log cli.extra.draft_overflow
                       cli.extra.draft_unknown_device PROPERTIES LABELS "unit;cli"
                       TIMEOUT 120 FIXTURES_REQUIRED gguf_fixtures)
endif()
