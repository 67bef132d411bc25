// V4.1 Engram n-gram hashing constants and row ids (model-spec §5.7), computed at load from the
// config instead of shipped: per Engram layer, max_ngram_size odd int64 multipliers
// (NumPy default_rng(10007·layer).integers(0, B, max_ngram_size)·2 + 1 with
// B = ((2^63 − 1) // engram_compressed_vocab_size) // 2), the successive unused primes from
// engram_vocab_size on, taken layer → n-gram → head, and their exclusive prefix sums as row offsets;
// a layer's table has Σ primes rows, which must equal its engram_num_embeddings.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "weights/model_config.h"

namespace ds {

struct EngramHashLayer {
  int layer = 0;
  std::vector<int64_t> multipliers;  // [max_ngram_size]: P_s = t_s · multipliers[s]
  std::vector<int64_t> primes;       // [(max_ngram_size − 1) · n_heads], (n-gram, head) order
  std::vector<int64_t> offsets;      // same shape: exclusive prefix sums of primes
  int64_t rows = 0;                  // Σ primes
};

// Each Engram layer's Σ primes (its table's rows), for configs being written (make-model).
std::vector<int64_t> engram_table_rows(const EngramConfig& e);

// One entry per engram_layer_ids; weights_bad_config naming text_config.engram_num_embeddings
// when a layer's row count is not Σ primes.
Result<std::vector<EngramHashLayer>> engram_hash_layers(const EngramConfig& e, const std::string& source);

// The (max_ngram_size − 1) · n_heads table rows of one position from its compressed ids
// ids[0] = current token, ids[s] = the token s positions back (already the pad id where §5.7's
// dead-token rules apply): R_1 = P_0 ⊕ P_1, R_n = R_{n−1} ⊕ P_n (int64, wrapping products), row =
// (R_n mod prime, taken non-negative as NumPy's % does) + offset. rows: [(max_ngram − 1) · n_heads].
void engram_rows(const EngramHashLayer& h, int n_heads, const int64_t* ids, int64_t* rows);

}  // namespace ds
