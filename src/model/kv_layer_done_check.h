// Test support for ModelRunner::set_kv_layer_done: runs one forward of `seq` over `tokens` with the
// callback set and checks that it is called once per main layer, in order, and that when layer l is
// reported the pages of `blocks` (blocks the forward completes) in every array of layer <= l already
// hold their final bytes while the arrays of later layers still hold what they held before.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <vector>

#include "model/model_runner.h"

namespace ds::kv_layer_check {

inline void expect_pages_final_as_each_layer_ends(ModelRunner& m, SequenceState& seq,
                                                  std::span<const int32_t> tokens,
                                                  const std::vector<int32_t>& blocks) {
  const std::vector<KvPageArray> arrays = m.kv_page_arrays();
  ASSERT_FALSE(arrays.empty());
  const auto page = [&](const KvPageArray& a, int32_t b) {
    const std::byte* p = a.base + b * a.block_bytes;
    return std::vector<std::byte>(p, p + a.block_bytes);
  };
  for (const KvPageArray& a : arrays)  // a marker the forward overwrites
    for (int32_t b : blocks)
      std::memset(a.base + b * a.block_bytes, 0x5C, static_cast<size_t>(a.block_bytes));
  // seen[a][k]: array a's page of blocks[k] when its layer was reported.
  std::vector<std::vector<std::vector<std::byte>>> seen(arrays.size());
  std::vector<int> reported;
  ASSERT_TRUE(m.set_kv_layer_done([&](int layer) {
    reported.push_back(layer);
    for (size_t a = 0; a < arrays.size(); ++a) {
      for (int32_t b : blocks) {
        if (arrays[a].layer == layer) seen[a].push_back(page(arrays[a], b));
        if (arrays[a].layer > layer) {
          EXPECT_EQ(page(arrays[a], b),
                    std::vector<std::byte>(static_cast<size_t>(arrays[a].block_bytes), std::byte{0x5C}))
              << "array " << a << " (layer " << arrays[a].layer << ") written before layer " << layer
              << " ended";
        }
      }
    }
  }));
  LogitsOutput out;
  ForwardRequest req{&seq, tokens, false};
  const Status st = m.forward({&req, 1}, out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(m.set_kv_layer_done(nullptr));
  const int n_layers = m.config().num_hidden_layers;
  ASSERT_EQ(static_cast<int>(reported.size()), n_layers);
  for (int l = 0; l < n_layers; ++l) EXPECT_EQ(reported[static_cast<size_t>(l)], l);
  int checked = 0;
  for (size_t a = 0; a < arrays.size(); ++a) {
    if (arrays[a].layer >= n_layers) continue;  // the MTP layer's: written by forward_mtp
    ASSERT_EQ(seen[a].size(), blocks.size()) << "array " << a;
    for (size_t k = 0; k < blocks.size(); ++k) {
      EXPECT_EQ(seen[a][k], page(arrays[a], blocks[k])) << "array " << a << ", block " << blocks[k];
      EXPECT_NE(seen[a][k], std::vector<std::byte>(seen[a][k].size(), std::byte{0x5C})) << "array " << a;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace ds::kv_layer_check
