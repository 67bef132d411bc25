#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/utf8.h"

namespace ds {

struct TokenizerImpl {
  TokenizerImpl(BpeModel m, AddedVocabulary a, PreTokenizer p)
      : model(std::move(m)), added(std::move(a)), pre(std::move(p)) {}
  BpeModel model;
  AddedVocabulary added;
  PreTokenizer pre;
  // Decoded bytes of every id, packed: id's bytes are decoded[offset[id], offset[id + 1]).
  std::string decoded;
  std::vector<uint32_t> offset;
  std::vector<uint8_t> known;  // 0 = no token has this id (a hole in the id space)
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;
};

namespace {

// HF's ByteLevel decoder, per token: if every character is in the byte-level alphabet the token
// stands for those bytes; otherwise (e.g. "<｜User｜>") its text is taken as is.
std::string decode_token_text(const ByteLevelAlphabet& alphabet, std::string_view text) {
  std::optional<std::string> bytes = alphabet.decode(text);
  return bytes ? std::move(*bytes) : std::string(text);
}

Result<int32_t> resolve_config_token(const TokenizerImpl& impl, const std::optional<std::string>& token,
                                     const char* field, const std::string& source) {
  if (!token) return -1;
  if (std::optional<int32_t> id = impl.added.token_to_id(*token)) return *id;
  if (std::optional<int32_t> id = impl.model.token_to_id(*token)) return *id;
  return Status(
      ErrorCode::tokenizer_bad_file,
      fmt::format("{}: {}: token {:?} is neither an added token nor in the vocab", source, field, *token));
}

Result<std::unique_ptr<TokenizerImpl>> build_impl(TokenizerSpec spec, const std::string& json_source,
                                                  const std::string& config_source) {
  DS_ASSIGN_OR_RETURN(BpeModel model, BpeModel::build(spec.bpe, json_source));
  DS_ASSIGN_OR_RETURN(AddedVocabulary added,
                      AddedVocabulary::build(std::move(spec.added_tokens), json_source));
  DS_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::build(spec.split_patterns, json_source));
  auto impl = std::make_unique<TokenizerImpl>(std::move(model), std::move(added), std::move(pre));

  int32_t vocab_size = impl->model.id_limit();
  for (const AddedToken& t : impl->added.tokens()) vocab_size = std::max(vocab_size, t.id + 1);
  impl->vocab_size = vocab_size;
  impl->offset.assign(static_cast<size_t>(vocab_size) + 1, 0);
  impl->known.assign(static_cast<size_t>(vocab_size), 0);
  for (int32_t id = 0; id < vocab_size; ++id) {
    impl->offset[static_cast<size_t>(id)] = static_cast<uint32_t>(impl->decoded.size());
    std::string_view text;
    if (const AddedToken* added_token = impl->added.find_by_id(id)) {
      text = added_token->content;
      impl->known[static_cast<size_t>(id)] = 1;
    } else if (impl->model.has_id(id)) {
      text = impl->model.token_text(id);
      impl->known[static_cast<size_t>(id)] = 1;
    }
    impl->decoded += decode_token_text(impl->model.alphabet(), text);
  }
  impl->offset[static_cast<size_t>(vocab_size)] = static_cast<uint32_t>(impl->decoded.size());

  DS_ASSIGN_OR_RETURN(impl->bos_id, resolve_config_token(*impl, spec.bos_token, "bos_token", config_source));
  DS_ASSIGN_OR_RETURN(impl->eos_id, resolve_config_token(*impl, spec.eos_token, "eos_token", config_source));
  impl->add_bos = spec.add_bos_token;
  return impl;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::load(const std::string& dir) {
  DS_ASSIGN_OR_RETURN(TokenizerSpec spec, load_tokenizer_spec(dir));
  DS_ASSIGN_OR_RETURN(auto impl,
                      build_impl(std::move(spec), dir + "/tokenizer.json", dir + "/tokenizer_config.json"));
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::from_json(const std::string& tokenizer_json, const std::string& config_json,
                                       const std::string& source) {
  const std::string json_source = source + ":tokenizer.json";
  const std::string config_source = source + ":tokenizer_config.json";
  DS_ASSIGN_OR_RETURN(TokenizerSpec spec, parse_tokenizer_json(tokenizer_json, json_source));
  if (!config_json.empty()) DS_TRY(parse_tokenizer_config(config_json, config_source, spec));
  DS_ASSIGN_OR_RETURN(auto impl, build_impl(std::move(spec), json_source, config_source));
  return Tokenizer(std::move(impl));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool parse_special) const {
  const size_t bad_offset = utf8::first_invalid_offset(text);
  if (bad_offset != utf8::kValid) {
    return Status(ErrorCode::tokenizer_bad_input,
                  fmt::format("text is not valid UTF-8: invalid byte 0x{:02X} at byte offset {}",
                              static_cast<uint8_t>(text[bad_offset]), bad_offset));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<TextSegment> segments;
  if (parse_special) {
    impl_->added.split(text, segments);
  } else if (!text.empty()) {
    segments.push_back({text, -1});
  }
  RegexScratch scratch;
  std::vector<std::string_view> pieces;
  std::vector<std::string_view> work;
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
      continue;
    }
    pieces.clear();
    DS_TRY(impl_->pre.split(segment.text, scratch, pieces, work));
    for (std::string_view piece : pieces) impl_->model.encode_word(piece, ids);
  }
  return ids;
}

Result<std::string_view> Tokenizer::token_bytes(int32_t id, bool skip_special) const {
  if (id < 0 || id >= impl_->vocab_size || !impl_->known[static_cast<size_t>(id)]) {
    return Status(ErrorCode::tokenizer_unknown_id,
                  fmt::format("token id {} is not in the vocabulary (size {})", id, impl_->vocab_size));
  }
  if (skip_special && impl_->added.is_special(id)) return std::string_view();
  const uint32_t begin = impl_->offset[static_cast<size_t>(id)];
  const uint32_t end = impl_->offset[static_cast<size_t>(id) + 1];
  return std::string_view(impl_->decoded).substr(begin, end - begin);
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (const int32_t id : ids) {
    DS_ASSIGN_OR_RETURN(const std::string_view bytes, token_bytes(id, skip_special));
    out.append(bytes);
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (std::optional<int32_t> id = impl_->added.token_to_id(token)) return id;
  return impl_->model.token_to_id(token);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
bool Tokenizer::add_bos_by_default() const { return impl_->add_bos; }
bool Tokenizer::is_special(int32_t id) const { return impl_->added.is_special(id); }

}  // namespace ds
