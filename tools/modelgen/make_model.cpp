#include "make_model.h"

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "presets.h"
#include "tensor_fill.h"
#include "tokenizer/engram_token_map.h"
#include "tokenizer/tokenizer.h"
#include "v4_tokenizer.h"
#include "weights/atomic_file.h"
#include "weights/safetensors_writer.h"

namespace ds::modelgen {
namespace {

namespace fs = std::filesystem;

// Greedy packing in name order; a tensor and its scale stay together; a tensor larger than the
// limit gets a shard of its own.
std::vector<std::vector<const TensorSpec*>> pack_shards(const std::vector<TensorSpec>& plan,
                                                        size_t max_shard_bytes) {
  std::vector<std::vector<const TensorSpec*>> shards;
  size_t shard_bytes = 0;
  for (const TensorSpec& t : plan) {
    const size_t bytes = stored_bytes(t);
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += bytes;
  }
  return shards;
}

std::string shard_file_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count);
  return buf;
}

Status write_text(const std::string& path, const std::string& text) {
  return write_file_atomically(path, {{text.data(), text.size()}});
}

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::io_error, path.string() + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// V3: the tokenizer files as they are. V4: the same plus V4's template markers (v4_tokenizer.h),
// so the checkpoint's prompts can be rendered with the V4 encoding.
Status write_tokenizer(const MakeModelOptions& options, const ModelConfig& config) {
  const std::string& from_dir = options.tokenizer_dir;
  const std::string& to_dir = options.out_dir;
  if (from_dir.empty() || !fs::is_directory(from_dir)) {
    return Status(ErrorCode::not_found, "tokenizer directory '" + from_dir +
                                            "' does not exist (pass --tokenizer DIR " +
                                            "holding tokenizer.json and tokenizer_config.json)");
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path src = fs::path(from_dir) / file;
    if (!fs::is_regular_file(src)) {
      return Status(ErrorCode::not_found, src.string() + ": missing tokenizer file");
    }
  }
  if (options.arch == "deepseek_v4" || options.arch == "deepseek_v41") {
    DS_ASSIGN_OR_RETURN(const std::string tok, read_text(fs::path(from_dir) / "tokenizer.json"));
    DS_ASSIGN_OR_RETURN(const std::string cfg, read_text(fs::path(from_dir) / "tokenizer_config.json"));
    DS_ASSIGN_OR_RETURN(
        TokenizerFiles files,
        add_template_markers(tok, cfg,
                             options.arch == "deepseek_v41" ? std::span<const V4Marker>(kV41Markers)
                                                            : std::span<const V4Marker>(kV4Markers),
                             config.vocab_size, from_dir));
    DS_TRY(write_text(to_dir + "/tokenizer.json", files.tokenizer_json));
    return write_text(to_dir + "/tokenizer_config.json", files.config_json);
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path src = fs::path(from_dir) / file;
    std::error_code ec;
    fs::copy_file(src, fs::path(to_dir) / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status(ErrorCode::io_error, src.string() + ": cannot copy: " + ec.message());
  }
  return ok_status();
}

// Generates one shard's tensors.
Result<SafetensorsWriter> fill_shard(const std::vector<const TensorSpec*>& specs, uint64_t seed,
                                     ThreadPool& pool) {
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  for (const TensorSpec* spec : specs) {
    FilledTensor filled = fill_tensor(*spec, seed, pool);
    DS_TRY(writer.add(spec->name, spec->dtype, spec->shape, std::move(filled.bytes)));
    if (spec->block_quantized()) {
      DS_TRY(writer.add(spec->scale_name(), spec->scale_dtype(), spec->scale_shape(),
                        std::move(filled.scale_bytes)));
    }
  }
  return writer;
}

// Shards of an earlier checkpoint in the same directory that this one does not write (a
// different preset or dtype has another shard count); removed so the directory holds one model.
Status remove_stale_shards(const std::string& dir, const nlohmann::json& weight_map) {
  std::set<std::string> current;
  for (const auto& [name, file] : weight_map.items()) current.insert(file.get<std::string>());
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool is_shard = name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
                          name.size() > 12 && name.ends_with(".safetensors");
    if ((is_shard || name == "model.safetensors") && current.count(name) == 0) {
      fs::remove(entry.path(), ec);
      if (ec) return Status(ErrorCode::io_error, entry.path().string() + ": cannot remove: " + ec.message());
    }
  }
  if (ec) return Status(ErrorCode::io_error, dir + ": cannot list: " + ec.message());
  return ok_status();
}

}  // namespace

size_t shard_bytes_for_preset(const std::string& preset) {
  if (preset == "tiny") return size_t{16} << 20;    // 4 shards
  if (preset == "small") return size_t{100} << 20;  // 4 shards
  return size_t{1} << 30;                           // bench: 4 (fp8) or 6 (bf16) shards
}

Result<MakeModelReport> make_model(const MakeModelOptions& options, ThreadPool& pool) {
  DS_ASSIGN_OR_RETURN(ModelConfig config, arch_preset(options.arch, options.preset, options.fp8));
  if (options.out_dir.empty()) return Status(ErrorCode::invalid_argument, "--out is required");
  // The preset must be a config the engine accepts: check it through the real parser.
  DS_TRY(parse_model_config(model_config_to_json(config), "preset " + options.arch + "/" + options.preset)
             .status());

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return Status(ErrorCode::io_error, options.out_dir + ": cannot create directory: " + ec.message());
  // Check the tokenizer before spending time on weights.
  DS_TRY(write_tokenizer(options, config));
  if (!options.engram) config.engram.reset();
  if (!options.dspark && config.dspark) {
    config.compress_ratios.resize(static_cast<size_t>(config.num_hidden_layers));
    config.num_nextn_predict_layers = 0;
    config.dspark.reset();
  }
  if (config.engram) {  // the compressed vocabulary of the tokenizer just written (model-spec §5.7)
    DS_ASSIGN_OR_RETURN(const Tokenizer tok, Tokenizer::load(options.out_dir));
    DS_ASSIGN_OR_RETURN(const EngramTokenMap map, build_engram_token_map(tok, config.vocab_size));
    config.engram->compressed_vocab_size = map.n_compressed;
  }
  // An old index must not outlive a half-written new checkpoint; the new one is written last.
  fs::remove(options.out_dir + "/model.safetensors.index.json", ec);
  DS_TRY(write_text(options.out_dir + "/config.json", model_config_to_json(config)));

  const std::vector<TensorSpec> plan = plan_tensors(config);
  const auto shards = pack_shards(plan, shard_bytes_for_preset(options.preset));
  nlohmann::json weight_map = nlohmann::json::object();
  MakeModelReport report;
  // Shard i is written by a background thread while shard i+1 is generated, so the disk and the
  // cores work at the same time; at most two shards are in memory. The future's destructor
  // joins the writer on every return path.
  std::future<Status> pending_write;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = shard_file_name(i + 1, shards.size());
    for (const TensorSpec* spec : shards[i]) {
      weight_map[spec->name] = file;
      if (spec->block_quantized()) weight_map[spec->scale_name()] = file;
    }
    DS_ASSIGN_OR_RETURN(SafetensorsWriter writer, fill_shard(shards[i], options.seed, pool));
    if (options.on_shard_generated) options.on_shard_generated(i + 1, shards.size());
    if (pending_write.valid()) DS_TRY(pending_write.get());
    pending_write =
        std::async(std::launch::async,
                   [w = std::move(writer), path = options.out_dir + "/" + file] { return w.write(path); });
  }
  if (pending_write.valid()) DS_TRY(pending_write.get());
  DS_TRY(remove_stale_shards(options.out_dir, weight_map));
  report.config = config;
  report.bytes = model_bytes(config, plan);
  report.n_tensors = weight_map.size();
  report.n_shards = static_cast<int>(shards.size());
  // The index goes last, so a reader never sees it name a shard that is not written yet.
  const nlohmann::json index = {{"metadata", {{"total_size", report.bytes.total}}},
                                {"weight_map", std::move(weight_map)}};
  DS_TRY(write_text(options.out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  return report;
}

}  // namespace ds::modelgen
