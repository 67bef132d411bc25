#include "cluster/router/request_prompt.h"

#include "cluster/router/prefix_index.h"
#include "recipe/anthropic_messages_request.h"
#include "recipe/chat_completions_request.h"
#include "recipe/completions_request.h"
#include "recipe/json_fields.h"
#include "recipe/prompt.h"
#include "recipe/responses_request.h"

namespace ds::cluster {
namespace {

std::optional<std::string> string_field(const recipe::Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<std::string> session_of(const recipe::Json& j) {
  if (auto k = string_field(j, "prompt_cache_key")) return k;
  if (auto u = string_field(j, "user")) return u;
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) return string_field(*m, "user_id");
  return std::nullopt;
}

std::vector<int32_t> chat_ids(server::ApiKind kind, const recipe::Json& j, const PromptRendering& r) {
  Result<recipe::ChatRequest> chat = kind == server::ApiKind::chat_completions
                                         ? recipe::convert_chat_completions_request(j, r.conversion)
                                     : kind == server::ApiKind::anthropic_messages
                                         ? recipe::convert_anthropic_messages_request(j, r.conversion)
                                         : recipe::convert_responses_request(j, r.conversion);
  if (!chat.ok()) return {};
  recipe::EncodingOptions encoding;
  encoding.kind = r.encoding;
  Result<recipe::RenderedPrompt> prompt = recipe::render_prompt(*chat, encoding);
  if (!prompt.ok()) return {};
  Result<std::vector<int32_t>> ids = recipe::tokenize_prompt(*prompt, *r.tokenizer);
  return ids.ok() ? std::move(ids).value() : std::vector<int32_t>{};
}

}  // namespace

RequestPrompt request_prompt(server::ApiKind kind, std::string_view body, const PromptRendering& rendering) {
  RequestPrompt out;
  const recipe::Json j = recipe::Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return out;
  out.session = session_of(j);
  if (auto c = j.find("cache"); c != j.end() && c->is_object())
    if (std::optional<std::string> salt = string_field(*c, "salt")) out.salt_tag = salt_tag_of(*salt);
  if (auto s = j.find("stream"); s != j.end() && s->is_boolean()) out.stream = s->get<bool>();
  if (rendering.tokenizer == nullptr) return out;
  if (kind == server::ApiKind::completions) {
    Result<recipe::CompletionRequest> c = recipe::convert_completions_request(j, rendering.conversion);
    if (!c.ok()) return out;
    Result<std::vector<int32_t>> ids = recipe::encode_completion_prompt(*c, *rendering.tokenizer);
    if (ids.ok()) out.token_ids = std::move(ids).value();
    return out;
  }
  out.token_ids = chat_ids(kind, j, rendering);
  return out;
}

}  // namespace ds::cluster
