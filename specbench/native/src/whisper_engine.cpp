// The whisper.cpp engine: a Whisper model's decoder behind the Model interface, its encoder as the
// window's audio prefill. Batched verification uses whisper_decode_all_logits_with_state (specbench's
// one edit to the vendored tree, WHISPER_EDITS in specbench/world/build.py): every row's logits from one
// forward. A rollback only moves n_past: each decode first drops the KV cells at positions >= n_past.
#include "engine.h"
#include "whisper.h"

#include "ggml.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <utility>

namespace {

// Parameters and weight bytes of a whisper.cpp ggml file (what llama_model_n_params / llama_model_size report
// for a GGUF): the tensors after the header, the mel filters and the vocabulary, in whisper.cpp's loader's
// order. {-1, -1} when the file does not parse.
std::pair<int64_t, int64_t> count_weights(const std::string & path) {
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) return {-1, -1};
    auto i32 = [&](int32_t & v) { return std::fread(&v, 4, 1, f) == 1; };
    int64_t n_params = 0, bytes = 0;
    int32_t v = 0, n_mel = 0, n_fft = 0, n_vocab = 0;
    bool ok = std::fseek(f, 4 + 11 * 4, SEEK_SET) == 0 && i32(n_mel) && i32(n_fft) &&
              std::fseek(f, (long) n_mel * n_fft * 4, SEEK_CUR) == 0 && i32(n_vocab);
    for (int32_t i = 0; ok && i < n_vocab; i++) ok = i32(v) && std::fseek(f, v, SEEK_CUR) == 0;
    while (ok) {
        int32_t n_dims = 0, name_len = 0, ttype = 0;
        if (!i32(n_dims)) break;  // end of file: every tensor read
        ok = i32(name_len) && i32(ttype) && n_dims >= 1 && n_dims <= 4 && ttype >= 0 && ttype < GGML_TYPE_COUNT;
        int64_t ne[4] = {1, 1, 1, 1};
        for (int d = 0; ok && d < n_dims; d++) ok = i32(v) && (ne[d] = v) > 0;
        if (!ok) break;
        const int64_t size = (int64_t) ggml_row_size((ggml_type) ttype, ne[0]) * ne[1] * ne[2] * ne[3];
        n_params += ne[0] * ne[1] * ne[2] * ne[3];
        bytes += size;
        ok = std::fseek(f, name_len + size, SEEK_CUR) == 0;
    }
    std::fclose(f);
    return ok ? std::make_pair(n_params, bytes) : std::make_pair<int64_t, int64_t>(-1, -1);
}

class WhisperModel : public Model {
  public:
    WhisperModel(const ModelSpec & spec, int max_outputs) : Model(spec, 0, 0, max_outputs) {
        if (spec.device != "cpu") {
            throw JobError("the " + spec.role + " " + spec.path + " is a whisper.cpp model; device '" + spec.device +
                               "' is not run by the whisper.cpp engine",
                           "use \"device\": \"cpu\" for whisper.cpp models");
        }
        if (!spec.mmproj.empty()) {
            throw JobError("the " + spec.role + " " + spec.path + " is a whisper.cpp model, which hears audio through "
                           "its own encoder; mmproj " + spec.mmproj + " is not used by it",
                           "drop the " + spec.role + "'s mmproj");
        }
        whisper_context_params cp = whisper_context_default_params();
        cp.use_gpu = false;
        ctx_ = whisper_init_from_file_with_params_no_state(spec.path.c_str(), cp);
        if (ctx_ == nullptr) {
            throw JobError("could not load the " + spec.role + " model " + spec.path + " with whisper.cpp",
                           "the log on stderr says why");
        }
        state_ = whisper_init_state(ctx_);
        if (state_ == nullptr) {
            whisper_free(ctx_);
            throw JobError("could not create a whisper.cpp state for the " + spec.role + " model " + spec.path,
                           "free memory; the log on stderr says why");
        }
        eot_ = whisper_token_eot(ctx_);
        stride_ = whisper_n_vocab(ctx_);
        n_vocab_ = eot_ + 1;  // text tokens and <|endoftext|>: what greedy decoding chooses among
        n_ctx_ = whisper_n_text_ctx(ctx_);
        n_batch_ = n_ctx_;
        max_outputs_ = std::min(max_outputs, n_ctx_);
        std::tie(n_params_, size_bytes_) = count_weights(spec.path);
    }
    ~WhisperModel() override {
        whisper_free_state(state_);
        whisper_free(ctx_);
    }

    ModelFormat format() const override { return ModelFormat::whisper; }
    bool is_eog(llama_token t) const override { return t == eot_; }
    json describe() const override {
        return json{{"model", spec_.role},
                    {"path", spec_.path},
                    {"engine", "whisper.cpp"},
                    {"desc", std::string("whisper ") + whisper_model_type_readable(ctx_) +
                                 (whisper_is_multilingual(ctx_) ? "" : ".en")},
                    {"n_vocab", n_vocab_},
                    {"n_vocab_model", stride_},
                    {"n_params", n_params_},
                    {"size_bytes", size_bytes_},
                    {"n_audio_ctx", whisper_n_audio_ctx(ctx_)},
                    {"n_ctx", n_ctx_},
                    {"threads", spec_.threads},
                    {"device", spec_.device},
                    {"cpus", spec_.cpus}};
    }

    int64_t forward(const llama_token * tokens, int n, bool all_logits) override {
        if (n <= 0) throw JobError("internal: empty forward for the " + spec_.role);
        check_fits(n);
        if (all_logits && n > max_outputs_) {
            throw JobError("internal: " + std::to_string(n) + " logit rows exceed max_outputs " +
                           std::to_string(max_outputs_));
        }
        pin();
        const int64_t t0 = last_forward_start_us_ = now_us();
        const int rc = all_logits
                           ? whisper_decode_all_logits_with_state(ctx_, state_, tokens, n, kv_len_, spec_.threads)
                           : whisper_decode_with_state(ctx_, state_, tokens, n, kv_len_, spec_.threads);
        const int64_t us = now_us() - t0;
        if (rc != 0) {
            throw JobError("whisper.cpp's decode failed for the " + spec_.role + " (width " + std::to_string(n) +
                               ", depth " + std::to_string(kv_len_) + ")",
                           "the log on stderr says why");
        }
        kv_len_ += n;
        last_n_ = n;
        return us;
    }
    using Model::forward;

    int64_t forward_last(const llama_token * tokens, int n, int n_out) override {
        if (n <= 0 || n_out < 1 || n_out > n) throw JobError("internal: bad forward_last for the " + spec_.role);
        return forward(tokens, n, true);  // every row kept: the last n_out at their batch index
    }
    using Model::forward_last;

    void resize_context(int) override { kv_len_ = 0; }  // the text context is the model's, fixed
    void rollback(int keep) override { kv_len_ = std::min(kv_len_, keep); }
    void clear() override { kv_len_ = 0; }

    bool hears_audio() const override { return true; }
    // whisper_full's prompt for greedy English transcription: <|startoftranscript|>, then for a multilingual
    // model its language and task tokens (an English-only model has neither), then <|notimestamps|>.
    std::vector<llama_token> audio_prompt() const override {
        std::vector<llama_token> p = {whisper_token_sot(ctx_)};
        if (whisper_is_multilingual(ctx_)) {
            p.push_back(whisper_token_lang(ctx_, whisper_lang_id("en")));
            p.push_back(whisper_token_transcribe(ctx_));
        }
        p.push_back(whisper_token_not(ctx_));
        return p;
    }
    int64_t encode_audio(const std::vector<float> & pcm) override {
        audio_reused_ = keep_audio_ && encoded_ == pcm.data() && encoded_size_ == pcm.size();
        if (audio_reused_) {  // the state still holds this window's encoder output (decodes never change it)
            if (ahead_us_ < 0) return 0;
            audio_reused_ = false;  // encoded ahead for this decode (encode_audio_ahead): reported once, here
            return std::exchange(ahead_us_, -1);
        }
        ahead_us_ = -1;
        encoded_ = nullptr;
        pin();
        const int64_t t0 = now_us();
        if (whisper_pcm_to_mel_with_state(ctx_, state_, pcm.data(), (int) pcm.size(), spec_.threads) != 0 ||
            whisper_encode_with_state(ctx_, state_, 0, spec_.threads) != 0) {
            throw JobError("whisper.cpp could not encode the audio for the " + spec_.role, "the log on stderr says why");
        }
        encoded_ = pcm.data();
        encoded_size_ = pcm.size();
        return now_us() - t0;
    }

    std::string piece(llama_token t, bool special) const override {
        if (t < 0 || t >= stride_) return "";
        if (t >= eot_ && !special) return "";  // special tokens have no text
        return whisper_token_to_str(ctx_, t);
    }
    std::vector<llama_token> tokenize(const std::string & text, bool) const override {
        std::vector<llama_token> out(text.size() + 8);
        int n = whisper_tokenize(ctx_, text.c_str(), out.data(), (int) out.size());
        if (n < 0) {
            out.resize(-n);
            n = whisper_tokenize(ctx_, text.c_str(), out.data(), (int) out.size());
        }
        if (n < 0) {
            throw JobError("the " + spec_.role + " tokenizer failed on a mapped text of " + std::to_string(text.size()) +
                           " bytes");
        }
        out.resize(n);
        return out;
    }
    llama_token end_token() const override { return eot_; }
    std::string vocab_kind() const override {
        return std::string("whisper ") + (whisper_is_multilingual(ctx_) ? "multilingual" : "English");
    }
    int vocab_size() const override { return stride_; }
    std::string token_text(llama_token t) const override { return whisper_token_to_str(ctx_, t); }

  protected:
    const float * logits(int row) const override {
        if (row < 0) row = last_n_ - 1;
        if (row < 0 || row >= last_n_) throw JobError("internal: no logits for row " + std::to_string(row));
        return whisper_get_logits_from_state(state_) + (size_t) row * stride_;
    }

  private:
    const float * encoded_ = nullptr;  // the samples whose encoder output the state holds (keep_audio_prefill)
    size_t encoded_size_ = 0;
    void check_fits(int n) const {
        if (kv_len_ + n > n_ctx_) {
            throw JobError(spec_.role + " context full: " + std::to_string(kv_len_) + " + " + std::to_string(n) +
                               " tokens > Whisper's text context of " + std::to_string(n_ctx_) + " positions (" +
                               spec_.path + ")",
                           "lower the window's cap: Whisper decodes at most " + std::to_string(n_ctx_) +
                               " positions per 30 s window");
        }
    }

    whisper_context * ctx_ = nullptr;
    whisper_state * state_ = nullptr;
    whisper_token eot_ = 0;
    int stride_ = 0;  // the model's vocabulary: the logits buffer's row length
    int last_n_ = 0;  // rows of the last forward
    int64_t n_params_ = -1;    // tensors' elements in the file (-1: it did not parse)
    int64_t size_bytes_ = -1;  // their bytes
};

}  // namespace

std::unique_ptr<Model> open_whisper_model(const ModelSpec & spec, int, int max_outputs) {
    return std::make_unique<WhisperModel>(spec, max_outputs);
}
