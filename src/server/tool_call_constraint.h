// Strict tool calls (OpenAI `strict: true` on a function tool): the arguments the model writes inside
// its DSML tool-call block are constrained to each strict tool's parameters JSON Schema while decoding
// (grammar/dsml_tool_grammar.h, docs/grammar.md "Strict tool calls").
//
// When the grammar starts: with a forced tool choice (required / named) the prompt already opened the
// block, so from the first generated token; otherwise (auto) after the model writes the block's first
// `｜DSML｜` marker token: the text before it (reasoning, content) stays free.
#pragma once

#include "base/status.h"
#include "engine/engine.h"
#include "recipe/chat_types.h"
#include "recipe/prompt.h"
#include "tokenizer/tokenizer.h"

namespace ds::server {

// Nothing when no tool is strict (or tool_choice is none). A 400 when a strict tool meets an encoding
// without DSML (V3) or a response_format constraint, or when a schema does not compile (param: the
// tool's parameters field).
Status attach_tool_call_constraint(const recipe::ChatRequest& chat, const recipe::RenderedPrompt& prompt,
                                   const Tokenizer& tokenizer, Engine& engine, Request& request);

}  // namespace ds::server
