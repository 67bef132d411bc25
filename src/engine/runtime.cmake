# Engine runtime sources (ds_engine) and tests.
add_library(ds_engine
  request.cpp
  request_output.cpp
  request_stream.cpp
  step_batch.cpp
  step_executor.cpp
  sequence_slots.cpp
  speculative_config.cpp
  mtp_drafter.cpp
  dspark_drafter.cpp
  confidence_schedule.cpp
  speculation_policy.cpp
  speculation_costs.cpp
  pin_leases.cpp
  outside_kv_blocks.cpp
  cache_scopes.cpp
  engine.cpp
  model_loader.cpp
)
target_link_libraries(ds_engine PUBLIC ds_engine_scheduler ds_model ds_sampling ds_tokenizer ds_kvcache ds_grammar
                      PRIVATE nlohmann_json::nlohmann_json)
ds_set_warnings(ds_engine)

# Test double for the engine's tests and benchmarks (no tensors).
add_library(ds_engine_testing testing/fake_model_runner.cpp testing/scripted_output_runner.cpp)
target_link_libraries(ds_engine_testing PUBLIC ds_model ds_tokenizer PRIVATE nlohmann_json::nlohmann_json)
ds_set_warnings(ds_engine_testing)

ds_add_test(engine_output_test SOURCES request_output_test.cpp sequence_slots_test.cpp speculative_config_test.cpp
            speculation_policy_test.cpp confidence_schedule_test.cpp LIBS ds_engine)
ds_add_test(engine_test SOURCES engine_test.cpp engine_cache_control_test.cpp LIBS ds_engine ds_engine_testing)
ds_add_test(scripted_output_runner_test SOURCES testing/scripted_output_runner_test.cpp LIBS ds_engine ds_engine_testing)
# Needs make-model and the tokenizer files under models/ (recreated by CI): the `model` tier.
ds_add_test(engine_invariance_test SOURCES engine_invariance_test.cpp LIBS ds_engine ds_modelgen_testing LABELS model)
if(TARGET engine_invariance_test)
  target_compile_definitions(engine_invariance_test PRIVATE
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3")
endif()

# A sequence handed over between engines with its model state (P/D, docs/pd.md): the `model` tier.
ds_add_test(engine_state_handover_test SOURCES engine_state_handover_test.cpp LIBS ds_engine ds_modelgen_testing
  LABELS model)
if(TARGET engine_state_handover_test)
  target_compile_definitions(engine_state_handover_test PRIVATE
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3")
endif()

# The KV tiers' write and read paths on a real model and disk folder (docs/kvcache.md, Tiers).
ds_add_test(engine_tier_test SOURCES engine_tier_test.cpp LIBS ds_engine ds_modelgen_testing LABELS model)
if(TARGET engine_tier_test)
  target_compile_definitions(engine_tier_test PRIVATE
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3")
endif()

# Structured output end to end on a generated tiny model (the `model` tier).
ds_add_test(engine_grammar_test SOURCES engine_grammar_test.cpp LIBS ds_engine ds_modelgen_testing LABELS model)
if(TARGET engine_grammar_test)
  target_compile_definitions(engine_grammar_test PRIVATE
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3")
  target_link_libraries(engine_grammar_test PRIVATE nlohmann_json::nlohmann_json)
endif()

# Speculative decoding end to end on a generated tiny V3 (the `model` tier): lossless outputs and KV rows.
ds_add_test(engine_speculative_test SOURCES engine_speculative_test.cpp LIBS ds_engine ds_modelgen_testing LABELS model)
if(TARGET engine_speculative_test)
  target_compile_definitions(engine_speculative_test PRIVATE
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3")
endif()

# DeepSeek-V4.1 (with Engram) loaded as applications load it (model_loader.h: the token map from the
# checkpoint's tokenizer), on a generated tiny checkpoint (the `model` tier).
ds_add_test(v41_model_test SOURCES v41_model_test.cpp LIBS ds_engine ds_modelgen LABELS model)
if(TARGET v41_model_test)
  target_link_libraries(v41_model_test PRIVATE nlohmann_json::nlohmann_json)
endif()
if(TARGET v41_model_test)
  target_compile_definitions(v41_model_test PRIVATE  # the last two: model/v4_test_support.h
    DS_DEFAULT_TOKENIZER_DIR="${PROJECT_SOURCE_DIR}/models/tokenizer/deepseek-v3"
    DS_PYTHON3="/usr/bin/python3"
    DS_V4_REFERENCE="${PROJECT_SOURCE_DIR}/tests/reference/deepseek_v4_ref.py")
endif()
