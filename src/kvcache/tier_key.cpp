#include "kvcache/tier_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <random>

#include "base/unique_fd.h"

namespace ds {

namespace {

void append(std::vector<unsigned char>& out, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  out.insert(out.end(), p, p + n);
}

Status io_error(const std::string& path, const char* what) {
  return Status(ErrorCode::io_error, "kv tier secret " + path + ": " + what + ": " + std::strerror(errno));
}

constexpr size_t kSecretBytes = 32;
constexpr size_t kMinSecretBytes = 16;

Result<std::vector<std::byte>> read_secret(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return io_error(path, "open");
  std::vector<std::byte> secret(256);
  size_t n = 0;
  while (n < secret.size()) {
    const ssize_t got = ::read(fd.get(), secret.data() + n, secret.size() - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error(path, "read");
    if (got == 0) break;
    n += static_cast<size_t>(got);
  }
  if (n < kMinSecretBytes) {
    return Status(ErrorCode::invalid_argument, "kv tier secret " + path + " holds " + std::to_string(n) +
                                                   " bytes, fewer than " + std::to_string(kMinSecretBytes));
  }
  secret.resize(n);
  return secret;
}

}  // namespace

uint64_t tier_namespace(const TierNamespaceSpec& spec) {
  std::vector<unsigned char> bytes;
  append(bytes, &kTierFormatVersion, sizeof(kTierFormatVersion));
  append(bytes, &spec.model_fingerprint, sizeof(spec.model_fingerprint));
  append(bytes, &spec.block_size_tokens, sizeof(spec.block_size_tokens));
  append(bytes, &spec.block_bytes, sizeof(spec.block_bytes));
  append(bytes, spec.kv_layout.data(), spec.kv_layout.size());
  return XXH3_64bits(bytes.data(), bytes.size());
}

uint64_t tier_prefix_seed(const std::vector<std::byte>& secret, uint64_t namespace_id) {
  return XXH3_64bits_withSeed(secret.data(), secret.size(), namespace_id);
}

Result<std::vector<std::byte>> load_or_create_tier_secret(const std::string& path) {
  // Written to a private temp file, then linked into place: a reader never sees a short secret,
  // and of two servers creating it at once one link wins and both read the winner's bytes.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::random_device rd;
    std::array<unsigned char, kSecretBytes> secret{};
    for (unsigned char& b : secret) b = static_cast<unsigned char>(rd());
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!fd.valid()) return io_error(tmp, "create");
      if (::write(fd.get(), secret.data(), secret.size()) != static_cast<ssize_t>(secret.size()) ||
          ::fsync(fd.get()) != 0) {
        ::unlink(tmp.c_str());
        return io_error(tmp, "write");
      }
    }
    const int linked = ::link(tmp.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (linked != 0 && link_errno != EEXIST) {
      errno = link_errno;
      return io_error(path, "link");
    }
  }
  return read_secret(path);
}

}  // namespace ds
