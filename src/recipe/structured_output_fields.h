// The constraint fields other servers accept beside OpenAI's response_format, folded into the same
// ResponseFormat: vLLM's `structured_outputs: {json | regex | grammar | choice}` and its older
// `guided_json | guided_regex | guided_grammar | guided_choice`; SGLang's `regex` and `ebnf`. At most one
// constraint per request (response_format counts): two are a 400 naming the second.
#pragma once

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

// `format` holds what response_format / text.format said; the fields above are merged into it.
Status read_structured_output_fields(const Json& body, ResponseFormat& format);

}  // namespace ds::recipe
