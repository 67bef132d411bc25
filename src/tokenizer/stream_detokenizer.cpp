#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds {

StreamDetokenizer::StreamDetokenizer(const Tokenizer& tok, bool skip_special)
    : tok_(&tok), skip_special_(skip_special) {}

Result<std::string> StreamDetokenizer::push(int32_t id) {
  DS_ASSIGN_OR_RETURN(const std::string_view bytes, tok_->token_bytes(id, skip_special_));
  pending_.append(bytes);
  // Hold back a trailing partial character that a later token may complete; bytes that can never
  // become valid are replaced now, exactly as the whole-text lossy decode would replace them.
  const size_t n_ready = pending_.size() - utf8::incomplete_tail_length(pending_);
  std::string out;
  utf8::append_lossy(std::string_view(pending_).substr(0, n_ready), out);
  pending_.erase(0, n_ready);
  return out;
}

std::string StreamDetokenizer::flush() {
  std::string out = utf8::to_valid_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace ds
