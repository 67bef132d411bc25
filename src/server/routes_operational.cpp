#include "server/routes_operational.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

namespace ds::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Status bad(const std::string& path, const std::string& message) {
  return Status(ErrorCode::invalid_argument, fmt::format("{}: {}", path, message));
}

// The parsed body as an object, or a 400 naming "body".
Result<json> parse_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("body", "not valid JSON");
  if (!j.is_object()) return bad("body", "expected a JSON object");
  return j;
}

Result<std::string> tokenize_body(const OperationalRoutesConfig& c, const std::string& body) {
  DS_ASSIGN_OR_RETURN(json j, parse_object(body));
  if (j.contains("messages")) {
    return Status(ErrorCode::model_unsupported,
                  "messages: tokenizing chat messages is not supported; send prompt");
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
  json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", c.max_model_len}};
  return dump(out);
}

Result<std::string> detokenize_body(const OperationalRoutesConfig& c, const std::string& body) {
  DS_ASSIGN_OR_RETURN(json j, parse_object(body));
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) return bad("tokens", "required array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  const int64_t vocab = c.tokenizer->vocab_size();
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& t = (*tokens)[i];
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

Status add_operational_routes(Router& router, const OperationalRoutesConfig& config) {
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
