// Embedding the engine in a program: load a checkpoint, start an Engine, stream one request's
// tokens through a callback, then run a few requests concurrently through blocking streams.
//   embed_engine MODEL_DIR ["prompt" ...]
// (MODEL_DIR holds config.json, the safetensors and the tokenizer files; `deepinfer make-model
// --preset tiny --out DIR` makes a small random one.)
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/deepseek_v3.h"
#include "tokenizer/tokenizer.h"

namespace {

int fail(const ds::Status& st) {
  std::fprintf(stderr, "embed_engine: %s\n", st.to_string().c_str());
  return 1;
}

// BOS + the text (special tokens parsed), as `deepinfer generate` does without --chat.
ds::Result<ds::Request> make_request(const ds::Tokenizer& tok, const std::string& text, int32_t max_tokens) {
  ds::Request r;
  if (tok.add_bos_by_default() && tok.bos_id() >= 0) r.prompt_tokens.push_back(tok.bos_id());
  DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text));
  r.prompt_tokens.insert(r.prompt_tokens.end(), ids.begin(), ids.end());
  r.stop.max_tokens = max_tokens;
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 42;  // same seed, same prompt: same tokens, whatever else runs
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: embed_engine MODEL_DIR [\"prompt\" ...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::string> prompts(argv + 2, argv + argc);
  if (prompts.empty()) prompts = {"The capital of France is", "Once upon a time", "def fibonacci(n):"};

  // 1. The tokenizer and the model. The model's thread pool does the math of every forward.
  ds::Result<ds::Tokenizer> tok = ds::Tokenizer::load(dir);
  if (!tok.ok()) return fail(tok.status());
  ds::ModelOptions mo;
  mo.isa = ds::best_isa();
  mo.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  mo.max_seq_len = 1024;
  ds::Result<std::unique_ptr<ds::DeepSeekV3>> model = ds::DeepSeekV3::load(dir, mo);
  if (!model.ok()) return fail(model.status());

  // 2. The engine: it sizes the model's paged KV cache from the budget and starts its threads.
  ds::EngineConfig cfg;
  cfg.scheduler.max_seq_len = mo.max_seq_len;
  cfg.kv_cache_bytes = int64_t{256} << 20;
  ds::Result<std::unique_ptr<ds::Engine>> created = ds::Engine::create(cfg, **model, &*tok);
  if (!created.ok()) return fail(created.status());
  ds::Engine& engine = **created;

  // 3. Streaming: the sink runs on the engine thread for every event; it must not block.
  ds::Result<ds::Request> first = make_request(*tok, prompts[0], 24);
  if (!first.ok()) return fail(first.status());
  ds::RequestStream done;  // only used to wait for the end
  const ds::EventSink print_and_forward = [forward = done.sink()](ds::TokenEvent&& e) {
    std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    std::fflush(stdout);
    forward(std::move(e));
  };
  std::printf("%s", prompts[0].c_str());
  ds::Result<ds::RequestId> id = engine.submit(*first, print_and_forward);
  if (!id.ok()) return fail(id.status());
  const ds::TokenEvent streamed = done.collect();
  std::printf("\n[finish: %s, %lld prompt + %lld generated tokens]\n\n",
              ds::finish_reason_name(streamed.finish_reason),
              static_cast<long long>(streamed.usage.prompt_tokens),
              static_cast<long long>(streamed.usage.completion_tokens));

  // 4. Several requests at once (continuous batching), each read through a blocking stream.
  std::vector<ds::RequestStream> streams(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ds::Result<ds::Request> r = make_request(*tok, prompts[i], 16);
    if (!r.ok()) return fail(r.status());
    if (ds::Result<ds::RequestId> rid = engine.submit(*r, streams[i].sink()); !rid.ok())
      return fail(rid.status());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const ds::TokenEvent e = streams[i].collect();
    if (!e.error.ok()) return fail(e.error);
    std::printf("[%zu] %s%s\n", i, prompts[i].c_str(), e.text.c_str());
  }
  const ds::EngineStats s = engine.stats();
  std::printf("\nsteps: %lld, generated tokens: %lld, KV blocks free: %d of %d\n",
              static_cast<long long>(s.n_steps), static_cast<long long>(s.generation_tokens_total),
              s.kv_blocks_free, s.kv_blocks_total);
  return 0;  // ~Engine joins its threads
}
