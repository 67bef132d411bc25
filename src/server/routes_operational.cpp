#include "server/routes_operational.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "recipe/chat_completions_request.h"
#include "recipe/prompt.h"

namespace ds::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Status bad(const std::string& path, const std::string& message) {
  return Status(ErrorCode::invalid_argument, fmt::format("{}: {}", path, message));
}

// The parsed body as an object, or a 400 naming "body". Ordered: a chat body's tool schemas are
// rendered in the client's key order.
Result<recipe::Json> parse_object(const std::string& body) {
  recipe::Json j = recipe::Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("body", "not valid JSON");
  if (!j.is_object()) return bad("body", "expected a JSON object");
  return j;
}

std::string tokenize_reply(const OperationalRoutesConfig& c, const std::vector<int32_t>& ids) {
  return dump(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", c.max_model_len}});
}

// vLLM's chat form. Fields only /tokenize has are checked here; the rest is a Chat Completions
// body (messages, tools, thinking, response_format, ...) parsed by the recipe, so both routes see
// the same conversation and the same template.
Result<std::string> tokenize_messages(const OperationalRoutesConfig& c, recipe::Json& j) {
  if (!c.chat_encoding) {
    return Status(ErrorCode::model_unsupported, "messages: this server has no chat encoding; send prompt");
  }
  if (auto it = j.find("add_generation_prompt"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("add_generation_prompt", "expected a boolean");
    // The DeepSeek encodings always end with the assistant turn's opening (and the thinking
    // switch); there is no template variant without it.
    if (!it->get<bool>())
      return bad("add_generation_prompt",
                 "false is not supported: the prompt always opens the assistant turn");
  }
  if (auto it = j.find("continue_final_message"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("continue_final_message", "expected a boolean");
    if (it->get<bool>())
      return bad("continue_final_message",
                 "not supported; send a final assistant message with \"prefix\": true");
  }
  // The template's own BOS is its first marker; add_special_tokens adds nothing more (vLLM's default
  // for chat is false too), so it is only type-checked.
  if (auto it = j.find("add_special_tokens"); it != j.end() && !it->is_null() && !it->is_boolean())
    return bad("add_special_tokens", "expected a boolean");
  // "model" is optional here (vLLM), required by Chat Completions.
  if (auto it = j.find("model"); it == j.end() || it->is_null()) j["model"] = c.model_id;
  DS_ASSIGN_OR_RETURN(recipe::ChatRequest chat, recipe::convert_chat_completions_request(j, c.conversion));
  recipe::EncodingOptions encoding;
  encoding.kind = *c.chat_encoding;
  DS_ASSIGN_OR_RETURN(recipe::RenderedPrompt prompt, recipe::render_prompt(chat, encoding));
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, recipe::tokenize_prompt(prompt, *c.tokenizer));
  return tokenize_reply(c, ids);
}

Result<std::string> tokenize_body(const OperationalRoutesConfig& c, const std::string& body) {
  DS_ASSIGN_OR_RETURN(recipe::Json j, parse_object(body));
  if (j.contains("messages")) {
    if (j.contains("prompt")) return bad("prompt", "send either prompt or messages, not both");
    return tokenize_messages(c, j);
  }
  auto prompt = j.find("prompt");
  if (prompt == j.end() || !prompt->is_string()) return bad("prompt", "required string");
  bool add_special = true;
  if (auto it = j.find("add_special_tokens"); it != j.end()) {
    if (!it->is_boolean()) return bad("add_special_tokens", "expected a boolean");
    add_special = it->get<bool>();
  }
  const std::string& text = prompt->get_ref<const std::string&>();
  // As Hugging Face does: added tokens written in the text are always recognised; add_special_tokens
  // decides only whether the BOS the tokenizer config asks for is prepended.
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, c.tokenizer->encode(text, /*parse_special=*/true));
  if (add_special && c.tokenizer->add_bos_by_default() && c.tokenizer->bos_id() >= 0) {
    ids.insert(ids.begin(), c.tokenizer->bos_id());
  }
  return tokenize_reply(c, ids);
}

Result<std::string> detokenize_body(const OperationalRoutesConfig& c, const std::string& body) {
  DS_ASSIGN_OR_RETURN(recipe::Json j, parse_object(body));
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) return bad("tokens", "required array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  const int64_t vocab = c.tokenizer->vocab_size();
  for (size_t i = 0; i < tokens->size(); ++i) {
    const recipe::Json& t = (*tokens)[i];
    if (!t.is_number_integer()) return bad(fmt::format("tokens[{}]", i), "expected an integer");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      return bad(fmt::format("tokens[{}]", i), fmt::format("id {} out of range [0, {})", id, vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  DS_ASSIGN_OR_RETURN(std::string text, c.tokenizer->decode(ids));
  return dump(json{{"prompt", text}});
}

}  // namespace

Status add_operational_routes(RouteTable& router, const OperationalRoutesConfig& config) {
  auto c = std::make_shared<const OperationalRoutesConfig>(config);
  const RouteOptions operational{ErrorStyle::openai, RouteAccess::operational};
  const RouteOptions keyed{ErrorStyle::openai, RouteAccess::api_key};

  DS_TRY(router.add("GET", "/health", operational, [c](ServerRequest, std::shared_ptr<ResponseChannel> out) {
    if (c->healthy && !c->healthy()) {
      out->send_error(Status(ErrorCode::engine_shutting_down, "the engine is not healthy"));
      return;
    }
    out->send_json(200, R"({"status":"ok"})");
  }));
  DS_TRY(router.add("GET", "/ready", operational, [c](ServerRequest, std::shared_ptr<ResponseChannel> out) {
    if (c->ready && !c->ready()) {
      out->send_error(Status(ErrorCode::engine_shutting_down, "not ready"));
      return;
    }
    out->send_json(200, R"({"status":"ready"})");
  }));
  if (c->metrics != nullptr) {
    DS_TRY(
        router.add("GET", "/metrics", operational, [c](ServerRequest, std::shared_ptr<ResponseChannel> out) {
          out->send(200, "text/plain; version=0.0.4; charset=utf-8", c->metrics->render());
        }));
  }
  DS_TRY(router.add("GET", "/v1/models", keyed, [c](ServerRequest, std::shared_ptr<ResponseChannel> out) {
    const json model = {
        {"id", c->model_id},       {"object", "model"},   {"created", c->created_unix_s},
        {"owned_by", "deepinfer"}, {"root", c->model_id}, {"max_model_len", c->max_model_len}};
    out->send_json(200, dump(json{{"object", "list"}, {"data", json::array({model})}}));
  }));
  if (c->tokenizer != nullptr) {
    DS_TRY(
        router.add("POST", "/tokenize", keyed, [c](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
          Result<std::string> body = tokenize_body(*c, req.body);
          if (!body.ok()) {
            out->send_error(body.status());
            return;
          }
          out->send_json(200, std::move(body).value());
        }));
    DS_TRY(router.add("POST", "/detokenize", keyed,
                      [c](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                        Result<std::string> body = detokenize_body(*c, req.body);
                        if (!body.ok()) {
                          out->send_error(body.status());
                          return;
                        }
                        out->send_json(200, std::move(body).value());
                      }));
  }
  return ok_status();
}

}  // namespace ds::server
