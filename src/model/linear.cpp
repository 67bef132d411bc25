#include "model/linear.h"

#include <cstring>

#include "kernels/matmul.h"
#include "tensor/dtype.h"

namespace ds {

Result<WeightMatrix> select_rows(const WeightMatrix& w, std::span<const int32_t> ids,
                                 std::vector<uint8_t>& storage) {
  storage.clear();
  if (w.format != WeightFormat::bf16 && w.format != WeightFormat::f32)
    return Status(ErrorCode::model_unsupported, "a draft vocabulary head needs a BF16 or F32 head");
  const size_t row_bytes = static_cast<size_t>(w.cols) * (w.format == WeightFormat::bf16 ? 2 : 4);
  storage.resize(ids.size() * row_bytes);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= w.rows) {
      storage.clear();
      return Status(ErrorCode::invalid_argument,
                    "draft vocabulary id " + std::to_string(ids[i]) + " out of range");
    }
    std::memcpy(storage.data() + i * row_bytes,
                static_cast<const uint8_t*>(w.data) + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
  }
  WeightMatrix sub = w;
  sub.data = storage.data();
  sub.rows = static_cast<int64_t>(ids.size());
  return sub;
}

Result<Linear> load_linear_layer(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block) {
  Linear l;
  DS_ASSIGN_OR_RETURN(l.w, load_linear(ckpt, prefix, rows, cols, block, l.scale_storage));
  return l;
}

Isa matmul_isa(Isa requested, const WeightMatrix& w) { return w.cols % 16 == 0 ? requested : Isa::reference; }

void linear(const ForwardContext& ctx, const WeightMatrix& w, const float* x, int64_t m, int64_t ldx,
            float* y, int64_t ldy) {
  if (m == 0) return;
  MatmulArgs args;
  args.x = x;
  args.m = m;
  args.ldx = ldx;
  args.w = &w;
  args.y = y;
  args.ldy = ldy;
  args.bf16_activations = ctx.bf16_activations;
  matmul(matmul_isa(ctx.isa, w), *ctx.pool, args);
}

namespace {

// The fixed part of a serialised Linear (host byte order: the ranks of one deployment share an ISA).
struct LinearRecordHeader {
  uint32_t magic = 0x4c4e5231;  // "LNR1"
  uint8_t format = 0;
  uint8_t pad[3] = {};
  int64_t rows = 0, cols = 0;
  int32_t block_rows = 0, block_cols = 0;
  int64_t data_bytes = 0;    // the weight bytes as stored
  int64_t scale_floats = 0;  // FP8: the f32 scale grid
  int64_t scale_e8m0 = 0;    // FP4: the E8M0 scale bytes
};

int64_t data_bytes_of(const WeightMatrix& w) {
  switch (w.format) {
    case WeightFormat::f32:
      return w.rows * w.cols * 4;
    case WeightFormat::bf16:
      return w.rows * w.cols * 2;
    case WeightFormat::fp8_e4m3_block:
      return w.rows * w.cols;
    case WeightFormat::fp4_e2m1_block:
      return w.rows * w.cols / 2;
  }
  return 0;
}

void append_raw(const void* p, size_t n, std::vector<std::byte>& out) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}

}  // namespace

void append_linear_bytes(const Linear& l, std::vector<std::byte>& out) {
  const WeightMatrix& w = l.w;
  LinearRecordHeader h;
  h.format = static_cast<uint8_t>(w.format);
  h.rows = w.rows;
  h.cols = w.cols;
  h.block_rows = w.block_rows;
  h.block_cols = w.block_cols;
  h.data_bytes = data_bytes_of(w);
  if (w.format == WeightFormat::fp8_e4m3_block) h.scale_floats = w.scale_rows() * w.scale_cols();
  if (w.format == WeightFormat::fp4_e2m1_block) h.scale_e8m0 = w.rows * w.scale_cols();
  append_raw(&h, sizeof(h), out);
  append_raw(w.data, static_cast<size_t>(h.data_bytes), out);
  if (h.scale_floats > 0) append_raw(w.scales, static_cast<size_t>(h.scale_floats) * sizeof(float), out);
  if (h.scale_e8m0 > 0) append_raw(w.scales_e8m0, static_cast<size_t>(h.scale_e8m0), out);
}

Result<Linear> read_linear_bytes(std::span<const std::byte> in, size_t& offset) {
  auto bad = [](const std::string& what) {
    return Status(ErrorCode::model_bad_input, "linear record: " + what);
  };
  LinearRecordHeader h;
  if (offset > in.size() || in.size() - offset < sizeof(h)) return bad("truncated header");
  std::memcpy(&h, in.data() + offset, sizeof(h));
  if (h.magic != LinearRecordHeader{}.magic) return bad("bad magic");
  if (h.format > static_cast<uint8_t>(WeightFormat::fp4_e2m1_block)) return bad("unknown format");
  if (h.rows <= 0 || h.cols <= 0 || h.block_rows <= 0 || h.block_cols <= 0) return bad("bad shape");
  Linear l;
  WeightMatrix& w = l.w;
  w.format = static_cast<WeightFormat>(h.format);
  w.rows = h.rows;
  w.cols = h.cols;
  w.block_rows = h.block_rows;
  w.block_cols = h.block_cols;
  const int64_t want_scales = w.format == WeightFormat::fp8_e4m3_block ? w.scale_rows() * w.scale_cols() : 0;
  const int64_t want_e8m0 = w.format == WeightFormat::fp4_e2m1_block ? w.rows * w.scale_cols() : 0;
  if (h.data_bytes != data_bytes_of(w) || h.scale_floats != want_scales || h.scale_e8m0 != want_e8m0)
    return bad("payload sizes do not match the shape");
  const size_t payload =
      static_cast<size_t>(h.data_bytes + h.scale_e8m0) + static_cast<size_t>(h.scale_floats) * sizeof(float);
  const size_t at = offset + sizeof(h);
  if (in.size() - at < payload) return bad("truncated payload");
  l.data_storage.reserve(static_cast<size_t>(h.data_bytes + h.scale_e8m0));  // one allocation, one copy
  l.data_storage.assign(in.begin() + static_cast<ptrdiff_t>(at),
                        in.begin() + static_cast<ptrdiff_t>(at + static_cast<size_t>(h.data_bytes)));
  size_t p = at + static_cast<size_t>(h.data_bytes);
  if (h.scale_floats > 0) {
    l.scale_storage.resize(static_cast<size_t>(h.scale_floats));
    std::memcpy(l.scale_storage.data(), in.data() + p, l.scale_storage.size() * sizeof(float));
    p += l.scale_storage.size() * sizeof(float);
    w.scales = l.scale_storage.data();
  }
  if (h.scale_e8m0 > 0) {
    l.data_storage.insert(l.data_storage.end(), in.begin() + static_cast<ptrdiff_t>(p),
                          in.begin() + static_cast<ptrdiff_t>(p + static_cast<size_t>(h.scale_e8m0)));
    p += static_cast<size_t>(h.scale_e8m0);
    w.scales_e8m0 = reinterpret_cast<const uint8_t*>(l.data_storage.data() + h.data_bytes);
  }
  w.data = l.data_storage.data();
  offset = p;
  return l;
}

Result<Linear> read_linear_bytes(std::span<const std::byte> in, size_t& offset, int64_t rows, int64_t cols) {
  DS_ASSIGN_OR_RETURN(Linear l, read_linear_bytes(in, offset));
  if (l.w.rows != rows || l.w.cols != cols) {
    return Status(ErrorCode::model_bad_input, "linear record: [" + std::to_string(l.w.rows) + ", " +
                                                  std::to_string(l.w.cols) + "], expected [" +
                                                  std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  return l;
}

std::vector<float> dequantize_to_f32(const WeightMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) {
      const int64_t i = r * w.cols + c;
      float v = 0.0f;
      switch (w.format) {
        case WeightFormat::f32:
          v = static_cast<const float*>(w.data)[i];
          break;
        case WeightFormat::bf16:
          v = bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
          break;
        case WeightFormat::fp8_e4m3_block:
          v = fp8_e4m3_to_f32(static_cast<const uint8_t*>(w.data)[i]) *
              w.scales[(r / w.block_rows) * w.scale_cols() + c / w.block_cols];
          break;
        case WeightFormat::fp4_e2m1_block: {
          const uint8_t byte = static_cast<const uint8_t*>(w.data)[i / 2];
          const uint8_t nibble = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          v = fp4_e2m1_to_f32(nibble) * e8m0_to_f32(w.scales_e8m0[r * w.scale_cols() + c / w.block_cols]);
          break;
        }
      }
      out[static_cast<size_t>(i)] = v;
    }
  }
  return out;
}

}  // namespace ds
