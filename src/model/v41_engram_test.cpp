// V4.1 Engram's n-gram ids (model/v41_engram.h): slots, the pad and dead-token rules, and the
// history that makes chunked prefill and decode hash as one prefill.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "model/v41_engram.h"

namespace ds {
namespace {

EngramTokenRules rules() {
  auto map = std::make_shared<std::vector<int32_t>>(10);
  std::iota(map->begin(), map->end(), 100);  // token t -> compressed 100 + t
  EngramTokenRules r;
  r.compressed = map;
  r.pad_compressed = 102;  // pad token 2
  r.dead_token = 9;        // the image token
  r.n_slots = 4;
  return r;
}

std::vector<int64_t> ids_of(const std::vector<int32_t>& tokens, std::vector<int32_t>& history,
                            std::vector<uint8_t>* gated_out = nullptr) {
  std::vector<int64_t> ids(tokens.size() * 4);
  std::vector<uint8_t> gated(tokens.size());
  engram_ngram_ids(rules(), history, tokens, ids.data(), gated.data());
  if (gated_out) *gated_out = gated;
  return ids;
}

TEST(V41EngramNgrams, SlotsLookBackAndPadBeforeTheStart) {
  std::vector<int32_t> history;
  const std::vector<int64_t> ids = ids_of({5, 6, 7, 8}, history);
  EXPECT_EQ(ids, (std::vector<int64_t>{105, 102, 102, 102,  //
                                       106, 105, 102, 102,  //
                                       107, 106, 105, 102,  //
                                       108, 107, 106, 105}));
  EXPECT_EQ(history, (std::vector<int32_t>{6, 7, 8}));
}

TEST(V41EngramNgrams, ChunksAndDecodeEqualOnePass) {
  const std::vector<int32_t> tokens{5, 6, 7, 8, 1, 3, 4, 0};
  std::vector<int32_t> h_all;
  const std::vector<int64_t> all = ids_of(tokens, h_all);
  std::vector<int32_t> h;
  std::vector<int64_t> chunked = ids_of({5, 6, 7}, h);
  for (int32_t t : {8, 1, 3, 4, 0}) {  // then one token at a time
    const std::vector<int64_t> one = ids_of({t}, h);
    chunked.insert(chunked.end(), one.begin(), one.end());
  }
  EXPECT_EQ(chunked, all);
  EXPECT_EQ(h, h_all);
}

TEST(V41EngramNgrams, AnImageTokenIsUngatedAndCutsTheLongerSlots) {
  std::vector<int32_t> history;
  std::vector<uint8_t> gated;
  const std::vector<int64_t> ids = ids_of({5, 9, 6, 7}, history, &gated);
  EXPECT_EQ(gated, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(ids, (std::vector<int64_t>{105, 102, 102, 102,  //
                                       109, 105, 102, 102,  // the image token itself: gate 0
                                       106, 102, 102, 102,  // slot 1 is the image token
                                       107, 106, 102, 102}));
}

}  // namespace
}  // namespace ds
