// A DeepSeek-V4 sequence's unpaged state as bytes (ModelRunner::export_sequence_state): what a
// continuation needs beyond the paged blocks — per main layer the window ring, the compressors'
// partial groups and the counts of compressed entries and indexer keys in the pages; V4.1's Engram
// history and index-key publisher. The MTP layer, the DSpark rings and a running chunk's undo
// journal are not carried: the receiving slot starts them as a replay does (drafts only).
//
// Layout (native little-endian, x86): magic "DSV4STAT", u32 version, i64 n_tokens, u32 n_layers,
// per layer its fields in declaration order, then the Engram history and the publisher. Vectors are
// a u64 count + elements; the float arrays (rings, partial groups) keep only their rows that differ
// from the initial value (empty ring slots, unstarted groups: at a block boundary every HCA group and
// CSA's current one), each column in bf16 where that is exact for every kept row (the window KV's
// FP8-simulated columns; its rope columns stay f32) — lossless either way. Decoding checks every shape
// against the slot's own fresh layers, so bytes from a model with another configuration are refused, never
// half-applied.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/v4_kv_state.h"

namespace ds {

std::vector<std::byte> encode_v4_state(const V4SequenceSlot& slot);
// The most bytes encode_v4_state gives for a slot of `shape`'s layer shapes and Engram history
// length (every row kept, in f32).
int64_t max_encoded_v4_state_bytes(const V4SequenceSlot& shape);

// Fills `slot`'s layers (already reset to the model's fresh shapes), n_tokens, engram_history and
// published_index_keys from `bytes`. model_bad_input (and `slot` unchanged) on any mismatch.
Status decode_v4_state(std::span<const std::byte> bytes, V4SequenceSlot& slot);

}  // namespace ds
