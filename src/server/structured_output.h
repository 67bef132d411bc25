// The request's output constraint (recipe::ResponseFormat) compiled by the engine's grammar compiler
// and put on the engine Request. Errors become a 400 whose param is the field the constraint came from.
#pragma once

#include "base/status.h"
#include "engine/engine.h"
#include "recipe/chat_types.h"
#include "tokenizer/tokenizer.h"

namespace ds::server {

// thinking: the model reasons first; the grammar then starts after the `</think>` token.
Status attach_output_constraint(const recipe::ResponseFormat& format, bool thinking,
                                const Tokenizer& tokenizer, Engine& engine, Request& request);

}  // namespace ds::server
