#include "model/engram_hash.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/numpy_random.h"

namespace ds {

namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

constexpr uint64_t kSeedPerLayer = 10007;

}  // namespace

Result<std::vector<EngramHashLayer>> engram_hash_layers(const EngramConfig& e, const std::string& source) {
  const int64_t bound = (INT64_MAX / e.compressed_vocab_size) / 2;
  const int n_grams = e.max_ngram_size - 1;
  int64_t next_candidate = e.vocab_size;  // the primes are the successive ones from here, never reused
  std::vector<EngramHashLayer> out;
  for (std::size_t i = 0; i < e.layer_ids.size(); ++i) {
    EngramHashLayer h;
    h.layer = e.layer_ids[i];
    for (int64_t v : numpy_default_rng_integers(kSeedPerLayer * static_cast<uint64_t>(h.layer), 0, bound,
                                                e.max_ngram_size)) {
      h.multipliers.push_back(v * 2 + 1);
    }
    for (int k = 0; k < n_grams * e.n_heads; ++k) {
      while (!is_prime(next_candidate)) ++next_candidate;
      h.offsets.push_back(h.rows);
      h.primes.push_back(next_candidate);
      h.rows += next_candidate++;
    }
    if (h.rows != e.num_embeddings[i]) {
      return Status(ErrorCode::weights_bad_config,
                    source + ": text_config.engram_num_embeddings: element " + std::to_string(i) + " is " +
                        std::to_string(e.num_embeddings[i]) + ", but layer " + std::to_string(h.layer) +
                        "'s primes sum to " + std::to_string(h.rows) + " rows");
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<int64_t> engram_table_rows(const EngramConfig& e) {
  std::vector<int64_t> rows;
  int64_t next_candidate = e.vocab_size;
  for (size_t i = 0; i < e.layer_ids.size(); ++i) {
    int64_t sum = 0;
    for (int k = 0; k < (e.max_ngram_size - 1) * e.n_heads; ++k) {
      while (!is_prime(next_candidate)) ++next_candidate;
      sum += next_candidate++;
    }
    rows.push_back(sum);
  }
  return rows;
}

void engram_rows(const EngramHashLayer& h, int n_heads, const int64_t* ids, int64_t* rows) {
  const int n_grams = static_cast<int>(h.multipliers.size()) - 1;
  // Products wrap modulo 2^64 like NumPy's int64 arithmetic (done unsigned: no signed overflow).
  auto product = [&](int s) {
    return static_cast<int64_t>(static_cast<uint64_t>(ids[s]) * static_cast<uint64_t>(h.multipliers[s]));
  };
  int64_t r = product(0);
  for (int n = 1; n <= n_grams; ++n) {
    r ^= product(n);
    for (int head = 0; head < n_heads; ++head) {
      const int k = (n - 1) * n_heads + head;
      const int64_t p = h.primes[static_cast<std::size_t>(k)];
      int64_t m = r % p;
      if (m < 0) m += p;  // floor modulo, as NumPy's % for a positive divisor
      rows[k] = m + h.offsets[static_cast<std::size_t>(k)];
    }
  }
}

}  // namespace ds
