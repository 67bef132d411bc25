// Live EPLB's view of one MoE layer's routed experts (docs/expert-parallel.md): which ones this
// process holds, and an expert's weights as bytes to copy to another rank, so a new placement can
// be applied between steps without reloading the model. Implemented by Moe (V3) and V4Moe (V4,
// V4.1). Not thread-safe: call between forwards only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ds {

class RoutedExpertSet {
 public:
  virtual ~RoutedExpertSet() = default;
  // The model layer these experts belong to (RoutedChoices::layer).
  virtual int32_t layer_id() const = 0;
  virtual int64_t n_routed_experts() const = 0;
  virtual bool holds_expert(int32_t expert) const = 0;
  // Appends expert `expert`'s weights (which this process must hold) to `out`.
  virtual void append_expert_bytes(int32_t expert, std::vector<std::byte>& out) const = 0;
  // Installs expert `expert` from what append_expert_bytes wrote (on any rank of the same model);
  // the copy owns its bytes and computes the same bits. model_bad_input when the bytes do not
  // parse or their shapes are not this layer's.
  virtual Status load_expert_bytes(int32_t expert, std::span<const std::byte> bytes) = 0;
  // Frees expert `expert`'s weights (no-op when not held).
  virtual void drop_expert(int32_t expert) = 0;

 protected:
  RoutedExpertSet() = default;
  RoutedExpertSet(const RoutedExpertSet&) = default;
  RoutedExpertSet& operator=(const RoutedExpertSet&) = default;
  RoutedExpertSet(RoutedExpertSet&&) = default;
  RoutedExpertSet& operator=(RoutedExpertSet&&) = default;
};

}  // namespace ds
