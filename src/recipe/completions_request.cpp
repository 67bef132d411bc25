#include "recipe/completions_request.h"

#include <fmt/format.h>

#include "recipe/cache_fields.h"
#include "recipe/request_checks.h"
#include "recipe/request_error.h"
#include "recipe/structured_output_fields.h"

namespace ds::recipe {

namespace {

Result<std::vector<int32_t>> read_token_ids(const Json& v, const std::string& path,
                                            const RequestLimits& limits) {
  if (v.size() > limits.max_prompt_token_ids)
    return field_error(path, fmt::format("at most {} token ids are allowed", limits.max_prompt_token_ids));
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& id = v[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return field_error(index_path(path, i), "expected a non-negative token id");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

Status read_prompt(const Json& body, const RequestLimits& limits, CompletionRequest& out) {
  const Json* prompt = find_field(body, "prompt");
  if (prompt == nullptr) return field_error("prompt", "required");
  if (prompt->is_string()) {
    out.prompt_text = prompt->get<std::string>();
    return ok_status();
  }
  if (!prompt->is_array() || prompt->empty())
    return field_error("prompt",
                       "expected a string, an array of token ids, or a one-element array of either");
  const Json& first = (*prompt)[0];
  if (first.is_number()) {
    DS_ASSIGN_OR_RETURN(out.prompt_token_ids, read_token_ids(*prompt, "prompt", limits));
    return ok_status();
  }
  if (prompt->size() > 1) return unsupported_error("prompt", "only one prompt per request is supported");
  if (first.is_string()) {
    out.prompt_text = first.get<std::string>();
    return ok_status();
  }
  if (first.is_array() && !first.empty()) {
    DS_ASSIGN_OR_RETURN(out.prompt_token_ids, read_token_ids(first, "prompt[0]", limits));
    return ok_status();
  }
  return field_error("prompt[0]", "expected a string or a non-empty array of token ids");
}

}  // namespace

Result<CompletionRequest> convert_completions_request(const Json& body, const ConversionOptions& options) {
  if (!body.is_object()) return field_error("body", "expected object");
  CompletionRequest req;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> model, read_string(body, "model", ""));
  if (!model.has_value() || model->empty()) return field_error("model", "required");
  req.model = *model;
  DS_TRY(read_prompt(body, options.limits, req));
  if (const Json* suffix = find_field(body, "suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->empty()))
    return unsupported_error("suffix", "fill-in-the-middle (suffix) is not supported");
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> best_of, read_integer(body, "best_of", ""));
  if (best_of.has_value() && *best_of != 1)
    return unsupported_error("best_of", "only best_of = 1 is supported");
  if (const Json* bias = find_field(body, "logit_bias");
      bias != nullptr && !(bias->is_object() && bias->empty()))
    return unsupported_error("logit_bias", "not supported");
  DS_TRY(read_openai_sampling(body, options.limits, OpenAiApi::completions, req.sampling));
  DS_TRY(read_structured_output_fields(body, req.response_format));
  DS_ASSIGN_OR_RETURN(std::optional<bool> echo, read_bool(body, "echo", ""));
  req.echo = echo.value_or(false);
  DS_ASSIGN_OR_RETURN(std::optional<bool> stream, read_bool(body, "stream", ""));
  req.stream = stream.value_or(false);
  if (const Json* stream_options = find_field(body, "stream_options"); stream_options != nullptr) {
    if (!req.stream) return field_error("stream_options", "allowed only when stream is true");
    if (!stream_options->is_object()) return field_error("stream_options", "expected object");
    DS_ASSIGN_OR_RETURN(std::optional<bool> usage,
                        read_bool(*stream_options, "include_usage", "stream_options"));
    req.include_usage = usage.value_or(false);
  }
  DS_ASSIGN_OR_RETURN(std::optional<std::string> user, read_string(body, "user", ""));
  req.user = user.value_or("");
  DS_TRY(read_openai_cache_fields(body, req.cache));
  DS_TRY(read_cache_object(body, req.cache));
  return req;
}

Result<CompletionRequest> parse_completions_request(std::string_view body, const ConversionOptions& options) {
  DS_ASSIGN_OR_RETURN(Json json, parse_request_body(body));
  return convert_completions_request(json, options);
}

Result<std::vector<int32_t>> encode_completion_prompt(const CompletionRequest& request,
                                                      const Tokenizer& tokenizer,
                                                      const CompletionEncodingOptions& options) {
  if (!request.prompt_text.has_value()) return request.prompt_token_ids;
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                      tokenizer.encode(*request.prompt_text, options.parse_special));
  const int32_t bos = tokenizer.bos_id();
  if (options.add_bos && bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

}  // namespace ds::recipe
