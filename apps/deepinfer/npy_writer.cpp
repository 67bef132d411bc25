#include "npy_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace ds::cli {

Status write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  static_assert(std::endian::native == std::endian::little, "npy '<f4' is written from native floats");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces and ended by '\n'
  // to a multiple of 64 bytes (the NumPy format's alignment).
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return Status(ErrorCode::io_error, path + ": cannot open for writing: " + std::strerror(errno));
  const unsigned char prefix[10] = {0x93,
                                    'N',
                                    'U',
                                    'M',
                                    'P',
                                    'Y',
                                    1,
                                    0,
                                    static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
  const size_t n = static_cast<size_t>(rows * cols);
  bool ok = std::fwrite(prefix, 1, sizeof(prefix), f.get()) == sizeof(prefix) &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            (n == 0 || std::fwrite(data, sizeof(float), n, f.get()) == n);
  ok = std::fflush(f.get()) == 0 && ok;
  if (!ok) return Status(ErrorCode::io_error, path + ": write failed: " + std::strerror(errno));
  return ok_status();
}

}  // namespace ds::cli
