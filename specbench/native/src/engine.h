// The engine interface: one model + one context, and the few operations the modes need: timed
// forwards with logits for every row, greedy top-1 with its softmax probability, KV rollback.
#pragma once

#include "llama.h"
#include "protocol.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// Which model a job names, and how to run it.
struct ModelSpec {
    std::string role;    // "target" | "drafter": the name used in errors and op logs
    std::string path;    // GGUF file (llama.cpp) or whisper.cpp ggml file
    int threads = 0;     // 0: the job's "threads"
    std::string device;  // "cpu" or a ggml device name such as "GPUOpenCL"
    std::string mmproj;  // audio projector GGUF (libmtmd), for audio windows; "" if none
    std::vector<int> cpus;  // the lane's CPU set: the calling thread is pinned to it before each
                            // forward (empty: not pinned). Placement: docs/METHODS.md §4.1 Placement.
};

// Pins the calling thread to `cpus` for `role` (no-op when empty or already pinned there) and
// records, once per (role, thread), the CPU set read back from the kernel.
void pin_lane(const std::string & role, const std::vector<int> & cpus, int threads);
// Every recorded lane pinning, and the CPU set of every thread of this process, read back.
json pinning_report();

class MediaFrontEnd;  // audio.cpp: the model's libmtmd context

// Reads {"path", "threads", "device"} from the job object under `key`.
ModelSpec parse_model_spec(JobObject obj, const std::string & role, int default_threads);

struct Top1 {
    llama_token token;
    double prob;   // softmax probability of `token` (temperature 1); double so that the JSON
                   // value round-trips exactly and a threshold compares the same in Python
    float margin;  // logit of `token` minus the runner-up's: near-tie diagnostics
};

// Which engine runs a model file, told by its magic before anything loads.
enum class ModelFormat {
    gguf,     // "GGUF": llama.cpp
    whisper,  // "ggml" (0x67676d6c little-endian): whisper.cpp
};
// The format of `path` (JobError naming the role and file when it is missing or neither).
ModelFormat model_format(const std::string & path, const std::string & role);
const char * format_name(ModelFormat f);  // "GGUF (llama.cpp)" | "whisper.cpp ggml"

// One model + its context behind the few operations the modes need: timed forwards with logits
// for every row or the last, greedy top-1, KV rollback, the vocabulary. Two engines implement it
// (LlamaModel in engine.cpp, WhisperModel in whisper_engine.cpp); the modes see only this.
class Model {
  public:
    virtual ~Model() = default;
    Model(const Model &) = delete;
    Model & operator=(const Model &) = delete;

    const std::string & role() const { return spec_.role; }
    const std::string & path() const { return spec_.path; }
    const std::string & mmproj() const { return spec_.mmproj; }
    int threads() const { return spec_.threads; }
    const std::string & device() const { return spec_.device; }
    // Tokens argmax/top1 choose among: the whole vocabulary (llama.cpp), the text tokens and
    // <|endoftext|> (whisper.cpp, as its greedy decoding does).
    int n_vocab() const { return n_vocab_; }
    int kv_len() const { return kv_len_; }
    int n_ctx() const { return n_ctx_; }
    int n_batch() const { return n_batch_; }
    int max_outputs() const { return max_outputs_; }
    virtual ModelFormat format() const = 0;
    virtual bool is_eog(llama_token t) const = 0;
    virtual json describe() const = 0;

    // Appends `n` tokens at positions kv_len().. and returns the synchronized wall time in
    // microseconds. all_logits: keep the logits of every row (a verification); otherwise
    // only the last row. Wider than n_batch is allowed only without all_logits (prefill).
    virtual int64_t forward(const llama_token * tokens, int n, bool all_logits) = 0;
    // Pins the calling thread to this model's lane (forward() and forward_last() do it).
    void pin() const { pin_lane(spec_.role, spec_.cpus, spec_.threads); }
    int64_t forward(const std::vector<llama_token> & tokens, bool all_logits) {
        return forward(tokens.data(), (int) tokens.size(), all_logits);
    }
    // Logits for the last `n_out` rows only (a recycling ingest needs the tail's rows).
    // Rows keep their batch index: top1(n - n_out) .. top1(n - 1).
    virtual int64_t forward_last(const llama_token * tokens, int n, int n_out) = 0;
    int64_t forward_last(const std::vector<llama_token> & tokens, int n_out) {
        return forward_last(tokens.data(), (int) tokens.size(), n_out);
    }
    // now_us() when the last forward's timed span began: it ran until this + its time.
    int64_t last_forward_start_us() const { return last_forward_start_us_; }

    // Greedy choice for output row `row` of the last forward (-1: the last row).
    // Ties go to the lowest token id, the same rule on every path.
    llama_token argmax(int row) const;
    Top1 top1(int row) const;
    // The logits of output row `row` of the last forward, n_vocab() of them (valid until the next
    // forward): what the divergence mode compares between a width-1 and a batched row.
    const float * output_logits(int row) const { return logits(row); }

    // A new, empty context of n_ctx positions (same threads and batch sizes).
    virtual void resize_context(int n_ctx) = 0;
    virtual void rollback(int keep) = 0;  // drop KV positions >= keep
    virtual void clear() = 0;             // empty KV

    // Audio the model hears itself (whisper.cpp: its encoder), not through libmtmd.
    virtual bool hears_audio() const { return false; }
    // The decoder prompt after the audio (whisper.cpp's task tokens); empty for llama.cpp.
    virtual std::vector<llama_token> audio_prompt() const { return {}; }
    // Encodes 16 kHz mono samples (at most 30 s) as the window's audio prefill; the synchronized time in µs.
    virtual int64_t encode_audio(const std::vector<float> & pcm);
    // keep: encode_audio of the very samples it encoded last (the same window's vector) keeps that encoder
    // output and returns 0 (a decode job's "reuse_audio_prefill": the decode clock excludes the prefill).
    void keep_audio_prefill(bool keep) { keep_audio_ = keep; }
    // Encodes the samples now, on the calling thread (pinned to this lane), for the decodes of their window:
    // with keep_audio_prefill, the next encode_audio of the same samples returns this encode's time once (the
    // window's first decode that uses this model reports it, as though it had encoded them), then 0 as kept.
    void encode_audio_ahead(const std::vector<float> & pcm);
    const std::vector<int> & cpus() const { return spec_.cpus; }
    bool audio_prefill_reused() const { return audio_reused_; }  // the last encode_audio kept its output

    // Text of one token (special tokens rendered only when `special`), and the tokenizer.
    virtual std::string piece(llama_token t, bool special) const = 0;
    std::string detokenize(const std::vector<llama_token> & tokens, bool special) const;
    virtual std::vector<llama_token> tokenize(const std::string & text, bool parse_special) const = 0;
    // The token that ends a turn (EOT when the vocabulary has one, else EOS).
    virtual llama_token end_token() const = 0;
    // The vocabulary's identity for vocab_difference(): its kind, its size, and each token's text.
    virtual std::string vocab_kind() const = 0;
    virtual int vocab_size() const = 0;
    virtual std::string token_text(llama_token t) const = 0;
    // A token whose text is exactly byte b, or -1 (build_byte_tokens() first, once, before
    // any thread reads it).
    void build_byte_tokens() const;
    llama_token byte_token(unsigned char b) const { return byte_tokens_.empty() ? -1 : byte_tokens_[b]; }

  protected:
    Model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs)
        : spec_(spec), n_batch_(n_batch), max_outputs_(std::min(max_outputs, n_batch)), n_ctx_(n_ctx) {}
    // Logits of output row `row` of the last forward (-1: the last row); never null.
    virtual const float * logits(int row) const = 0;

    ModelSpec spec_;
    int n_vocab_ = 0;
    int n_batch_ = 0;
    int max_outputs_ = 0;
    int n_ctx_ = 0;
    int kv_len_ = 0;
    int64_t last_forward_start_us_ = 0;
    bool keep_audio_ = false;
    bool audio_reused_ = false;
    int64_t ahead_us_ = -1;  // encode_audio_ahead's time, until an encode_audio reports it; -1: none
    mutable std::vector<llama_token> byte_tokens_;
};

// A llama.cpp model (GGUF) and its context.
class LlamaModel : public Model {
  public:
    // n_batch: widest single graph (prefill is chunked to it); max_outputs: most rows with
    // logits in one forward (the logits buffer is max_outputs x n_vocab floats).
    LlamaModel(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs);
    ~LlamaModel() override;

    ModelFormat format() const override { return ModelFormat::gguf; }
    bool is_eog(llama_token t) const override { return llama_vocab_is_eog(vocab_, t); }
    json describe() const override;
    int64_t forward(const llama_token * tokens, int n, bool all_logits) override;
    using Model::forward;
    int64_t forward_last(const llama_token * tokens, int n, int n_out) override;
    using Model::forward_last;
    void resize_context(int n_ctx) override;
    void rollback(int keep) override;
    void clear() override;
    std::string piece(llama_token t, bool special) const override;
    std::vector<llama_token> tokenize(const std::string & text, bool parse_special) const override;
    llama_token end_token() const override;
    std::string vocab_kind() const override { return "llama.cpp type " + std::to_string(llama_vocab_type(vocab_)); }
    int vocab_size() const override { return n_vocab_; }
    std::string token_text(llama_token t) const override { return llama_vocab_get_text(vocab_, t); }

    // For the audio prefill (audio.cpp), which decodes embeddings through libmtmd.
    llama_model * raw_model() const { return model_; }
    llama_context * raw_context() const { return ctx_; }
    void set_kv_len(int n) { kv_len_ = n; }
    MediaFrontEnd * media() const { return media_.get(); }
    void set_media(std::shared_ptr<MediaFrontEnd> media) { media_ = std::move(media); }

  protected:
    const float * logits(int row) const override;

  private:
    void decode_chunk(const llama_token * tokens, int n, int first_out);
    void create_context(int n_ctx);
    // JobError unless n more tokens fit the context and, for a forward that must be one graph
    // (all or several logit rows), one batch: llama.cpp caps the batch at n_ctx.
    int check_fits(int n, bool one_batch) const;

    llama_model * model_ = nullptr;
    llama_context * ctx_ = nullptr;
    const llama_vocab * vocab_ = nullptr;
    llama_batch batch_{};
    std::shared_ptr<MediaFrontEnd> media_;  // freed before the model (declared last)
};

// A whisper.cpp model (whisper_engine.cpp): its decoder's context is the model's 448 text positions.
std::unique_ptr<Model> open_whisper_model(const ModelSpec & spec, int n_ctx, int max_outputs);
// The engine for `spec`'s file (told by its magic): LlamaModel or the whisper.cpp one.
std::unique_ptr<Model> open_model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs);
// JobError unless the two models run on the same engine (a Whisper drafter for a GGUF target, or the reverse).
void require_same_format(const ModelSpec & target, const ModelSpec & drafter);

// Same-vocabulary check (the rule llama.cpp's speculative example applies): same vocab
// type, token counts within 128 and identical token text from id 5 up. Returns "" when
// compatible, else why not.
std::string vocab_difference(const Model & target, const Model & drafter);
// Throws JobError when vocab_difference() is not empty.
void require_same_vocab(const Model & target, const Model & drafter);

// stderr logging of llama.cpp: warnings and errors only, unless verbose.
void install_log_filter(bool verbose);

int64_t now_us();
