# Output side of the recipe (issue #5 item 2): the incremental output parser and the response /
# stream builders of each API. Included from src/recipe/CMakeLists.txt.
target_sources(ds_recipe PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/output_stage_machine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/output_parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/response_common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/response_openai_chat.cpp
  ${CMAKE_CURRENT_LIST_DIR}/response_completions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/response_anthropic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/response_responses.cpp
  ${CMAKE_CURRENT_LIST_DIR}/api_responder.cpp
)

ds_add_test(recipe_output_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/output_parser_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/response_openai_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/response_anthropic_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/response_responses_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/api_responder_test.cpp
  LIBS ds_recipe ds_tokenizer nlohmann_json::nlohmann_json)
