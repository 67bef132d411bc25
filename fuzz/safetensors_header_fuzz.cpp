// libFuzzer target: SafetensorsFile::parse over arbitrary bytes must return ok or a Status, never
// crash, read out of bounds, hit UB or leak. Accepted files must describe tensors inside the buffer.
#include <cstddef>
#include <cstdint>

#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ds::SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!file.ok()) {
    if (file.status().message().find('\n') != std::string::npos) __builtin_trap();  // one-line errors
    return 0;
  }
  uint64_t total = 0;
  for (const ds::TensorEntry& t : file->tensors()) {
    if (t.data < data || t.nbytes > size || t.data > data + size - t.nbytes) __builtin_trap();
    if (t.view().nbytes() != t.nbytes) __builtin_trap();
    if (file->find(t.name) != &t) __builtin_trap();
    // Touch the first and last byte so ASan checks the range really is inside the input.
    if (t.nbytes > 0) total += t.data[0] + t.data[t.nbytes - 1];
  }
  return static_cast<int>(total & 0);
}
