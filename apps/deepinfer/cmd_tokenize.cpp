// `deepinfer tokenize` / `deepinfer detokenize`: the tokenizer on the command line, batch JSON in
// and out (what the peer test drives) plus a --text convenience. Errors are one line on stderr
// naming what is wrong, exit code 1; nothing is thrown out of a command.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "recipe/chat_completions_request.h"
#include "recipe/encoding.h"
#include "recipe/prompt.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "weights/model_config.h"

namespace ds::cli {
namespace {

using nlohmann::json;

struct TokenizeArgs {
  std::string model_dir;
  bool json_mode = false;
  bool chat = false;
  std::string text;
  bool add_bos = false;
  bool no_special = false;
  bool skip_special = false;
};

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "deepinfer %s: error: %s\n", command, message.c_str());
  return 1;
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// Parses stdin as JSON after checking it is UTF-8, so the error can name the byte offset.
Result<json> read_stdin_json() {
  const std::string input = read_stdin();
  const size_t bad = utf8::first_invalid_offset(input);
  if (bad != utf8::kValid) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("stdin is not valid UTF-8: invalid byte 0x{:02X} at byte offset {}",
                              static_cast<uint8_t>(input[bad]), bad));
  }
  try {
    return json::parse(input);
  } catch (const json::parse_error& e) {
    return Status(ErrorCode::invalid_argument, fmt::format("stdin is not valid JSON: {}", e.what()));
  }
}

Result<std::vector<int32_t>> encode_one(const Tokenizer& tok, std::string_view text,
                                        const TokenizeArgs& args) {
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text, /*parse_special=*/!args.no_special));
  if (args.add_bos) {
    if (tok.bos_id() < 0)
      return Status(ErrorCode::invalid_argument, "--add-bos: the tokenizer has no bos_token");
    ids.insert(ids.begin(), tok.bos_id());
  }
  return ids;
}

// The prompt encoding for --chat: the model_type of DIR/config.json, or V3 for a bare tokenizer.
Result<recipe::PromptEncodingKind> chat_encoding(const std::string& model_dir) {
  if (!std::filesystem::exists(model_dir + "/config.json")) return recipe::PromptEncodingKind::deepseek_v3;
  DS_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  return recipe::prompt_encoding_for_model_type(config.model_type);
}

// --chat: each element is a Chat Completions body; its prompt is rendered and tokenized exactly as
// the server does (the recipe), so tools outside the engine can check their own rendering.
int run_tokenize_chat(const TokenizeArgs& args) {
  Result<json> doc = read_stdin_json();
  if (!doc.ok()) return fail("tokenize", doc.status().message());
  if (!doc->is_array())
    return fail("tokenize",
                fmt::format("stdin: expected a JSON array of chat requests, got {}", doc->type_name()));
  Result<Tokenizer> tok = Tokenizer::load(args.model_dir);
  if (!tok.ok()) return fail("tokenize", tok.status().to_string());
  Result<recipe::PromptEncodingKind> kind = chat_encoding(args.model_dir);
  if (!kind.ok()) return fail("tokenize", kind.status().to_string());
  recipe::ConversionOptions conv;
  conv.default_thinking = *kind != recipe::PromptEncodingKind::deepseek_v3;
  recipe::EncodingOptions encoding;
  encoding.kind = *kind;
  std::string out = "[";
  for (size_t i = 0; i < doc->size(); ++i) {
    Result<recipe::ChatRequest> request = recipe::parse_chat_completions_request((*doc)[i].dump(), conv);
    if (!request.ok())
      return fail("tokenize", fmt::format("stdin: element [{}]: {}", i, request.status().message()));
    Result<recipe::RenderedPrompt> prompt = recipe::render_prompt(*request, encoding);
    if (!prompt.ok())
      return fail("tokenize", fmt::format("stdin: element [{}]: {}", i, prompt.status().message()));
    Result<std::vector<int32_t>> ids = recipe::tokenize_prompt(*prompt, *tok);
    if (!ids.ok())
      return fail("tokenize", fmt::format("stdin: element [{}]: {}", i, ids.status().to_string()));
    if (i > 0) out += ',';
    out += fmt::format("[{}]", fmt::join(*ids, ","));
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_tokenize(const TokenizeArgs& args) {
  if (args.chat) return run_tokenize_chat(args);
  if (!args.json_mode) {
    Result<Tokenizer> tok = Tokenizer::load(args.model_dir);
    if (!tok.ok()) return fail("tokenize", tok.status().to_string());
    Result<std::vector<int32_t>> ids = encode_one(*tok, args.text, args);
    if (!ids.ok()) return fail("tokenize", "--text: " + ids.status().to_string());
    std::printf("%s\n", fmt::format("{}", fmt::join(*ids, ",")).c_str());
    return 0;
  }
  // Input is checked before the (slow) tokenizer load so bad input fails fast.
  Result<json> doc = read_stdin_json();
  if (!doc.ok()) return fail("tokenize", doc.status().message());
  if (!doc->is_array())
    return fail("tokenize", fmt::format("stdin: expected a JSON array of strings, got {}", doc->type_name()));
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& item = (*doc)[i];
    if (!item.is_string())
      return fail("tokenize",
                  fmt::format("stdin: element [{}] is {}, expected a string", i, item.type_name()));
  }
  Result<Tokenizer> tok = Tokenizer::load(args.model_dir);
  if (!tok.ok()) return fail("tokenize", tok.status().to_string());
  std::string out = "[";
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& item = (*doc)[i];
    Result<std::vector<int32_t>> ids = encode_one(*tok, item.get_ref<const std::string&>(), args);
    if (!ids.ok())
      return fail("tokenize", fmt::format("stdin: element [{}]: {}", i, ids.status().to_string()));
    if (i > 0) out += ',';
    out += fmt::format("[{}]", fmt::join(*ids, ","));
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_detokenize(const TokenizeArgs& args) {
  // Input is checked before the (slow) tokenizer load so bad input fails fast.
  Result<json> doc = read_stdin_json();
  if (!doc.ok()) return fail("detokenize", doc.status().message());
  if (!doc->is_array())
    return fail("detokenize",
                fmt::format("stdin: expected a JSON array of id arrays, got {}", doc->type_name()));
  std::vector<std::vector<int32_t>> batch;
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& item = (*doc)[i];
    if (!item.is_array())
      return fail("detokenize",
                  fmt::format("stdin: element [{}] is {}, expected an array of ids", i, item.type_name()));
    std::vector<int32_t>& ids = batch.emplace_back();
    for (size_t j = 0; j < item.size(); ++j) {
      const json& id = item[j];
      // Unsigned values are range-checked as unsigned: above INT64_MAX, get<int64_t>() would wrap.
      if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX) ||
          (!id.is_number_unsigned() && (id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX))) {
        return fail("detokenize",
                    fmt::format("stdin: element [{}][{}] is {}, expected a 32-bit integer token id", i, j,
                                id.dump()));
      }
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  Result<Tokenizer> tok = Tokenizer::load(args.model_dir);
  if (!tok.ok()) return fail("detokenize", tok.status().to_string());
  json out = json::array();
  for (size_t i = 0; i < batch.size(); ++i) {
    Result<std::string> bytes = tok->decode(batch[i], args.skip_special);
    if (!bytes.ok())
      return fail("detokenize", fmt::format("stdin: element [{}]: {}", i, bytes.status().to_string()));
    // As HF's decode does: bytes that are not valid UTF-8 become U+FFFD.
    out.push_back(utf8::to_valid_lossy(*bytes));
  }
  const std::string text = out.dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

// The boundary: whatever a library below throws (bad_alloc, ...) becomes exit code 1 here.
template <class F>
int guarded(const char* command, F&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    return fail(command, e.what());
  }
}

}  // namespace

void add_tokenize_commands(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<TokenizeArgs>();

  CLI::App* tok =
      app.add_subcommand("tokenize", "Text -> token ids (as HF encode with add_special_tokens=false)");
  tok->add_option("--model", args->model_dir, "Model directory (tokenizer.json inside)")->required();
  CLI::Option* json_flag = tok->add_flag(
      "--json", args->json_mode, "Read a JSON array of strings on stdin, print a JSON array of id arrays");
  CLI::Option* text_opt =
      tok->add_option("--text", args->text, "Encode this text, print ids comma-separated");
  json_flag->excludes(text_opt);
  tok->add_flag("--chat", args->chat,
                "Read a JSON array of Chat Completions bodies on stdin, print the rendered prompts' ids "
                "(the encoding of DIR/config.json's model_type, deepseek_v3 without one)")
      ->excludes(text_opt);
  tok->add_flag("--add-bos", args->add_bos, "Prepend the BOS id");
  tok->add_flag("--no-special", args->no_special, "Added-token text is plain text (BPE), not special ids");
  tok->callback([args, &ctx, json_flag, text_opt] {
    if (json_flag->count() == 0 && text_opt->count() == 0 && !args->chat) {
      std::fprintf(stderr, "deepinfer tokenize: error: give --json or --chat (stdin) or --text TEXT\n");
      ctx.exit_code = 2;
      return;
    }
    ctx.exit_code = guarded("tokenize", [&] { return run_tokenize(*args); });
  });

  CLI::App* detok = app.add_subcommand("detokenize", "Token ids -> text (as HF decode)");
  detok->add_option("--model", args->model_dir, "Model directory (tokenizer.json inside)")->required();
  detok
      ->add_flag("--json", args->json_mode,
                 "Read a JSON array of id arrays on stdin, print a JSON array of strings")
      ->required();
  detok->add_flag("--skip-special", args->skip_special, "Drop special tokens");
  detok->callback(
      [args, &ctx] { ctx.exit_code = guarded("detokenize", [&] { return run_detokenize(*args); }); });
}

}  // namespace ds::cli
