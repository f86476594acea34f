// Audio prompts through libmtmd: load a model's mmproj, read a window's 16 kHz mono
// samples, tokenize its prompt into chunks, and prefill them in two timed parts.
#include "audio.h"
#include "modes.h"

#include "ggml-backend.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#ifdef SPECBENCH_WITH_MTMD
#include "mtmd-helper.h"
#include "mtmd.h"
#endif

namespace {

// A window's samples: 16 kHz mono, raw little-endian f32 or s16.
std::vector<float> read_samples(const Window & w) {
    std::ifstream f(w.audio_path, std::ios::binary);
    if (!f) {
        throw JobError("window '" + w.id + "': cannot read audio file " + w.audio_path + " (" +
                           std::strerror(errno) + ")",
                       "windows[].audio.path must name raw 16 kHz mono samples (f32 or s16 little-endian)");
    }
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t width = w.audio_format == "s16" ? 2 : 4;
    if (bytes.empty() || bytes.size() % width != 0) {
        throw JobError("window '" + w.id + "': audio file " + w.audio_path + " holds " + std::to_string(bytes.size()) +
                           " bytes; expected a non-empty whole number of " + w.audio_format + " samples",
                       "write 16 kHz mono samples as raw little-endian " + w.audio_format);
    }
    std::vector<float> pcm(bytes.size() / width);
    if (width == 4) {
        std::memcpy(pcm.data(), bytes.data(), bytes.size());
    } else {
        for (size_t i = 0; i < pcm.size(); i++) {
            int16_t v;
            std::memcpy(&v, bytes.data() + 2 * i, 2);
            pcm[i] = v / 32768.0f;
        }
    }
    return pcm;
}


// Whisper's encoder hears one 30 s window (whisper.cpp pads shorter audio and would drop the rest).
constexpr int kWhisperWindowSamples = 30 * 16000;

// A whisper.cpp model hears each window through its own encoder: the samples go with the window,
// the decoder prompt is the model's task prompt (the window's prompt text is not used).
void attach_whisper(Model & m, std::vector<Window> & windows, bool drafter) {
    for (Window & w : windows) {
        if (!w.is_audio()) {
            throw JobError("window '" + w.id + "' has no audio, but the " + m.role() + " " + m.path() +
                               " is a whisper.cpp model, which transcribes audio windows only",
                           "give the window an \"audio\" object, or pass a GGUF model for text windows");
        }
        if (!w.pcm) {  // read once per window: the target's and the drafter's encoders hear the same samples
            auto samples = std::make_shared<std::vector<float>>(read_samples(w));
            if ((int64_t) samples->size() > kWhisperWindowSamples) {
                char secs[32];
                std::snprintf(secs, sizeof secs, "%.2f", samples->size() / 16000.0);
                throw JobError("window '" + w.id + "': audio " + w.audio_path + " lasts " + secs +
                                   " s, longer than Whisper's 30 s window",
                               "split the audio into windows of at most 30 s");
            }
            w.pcm = std::move(samples);
        }
        (drafter ? w.drafter_prompt : w.prompt) = m.audio_prompt();
    }
}

}  // namespace

#ifdef SPECBENCH_WITH_MTMD

namespace {

std::string g_mtmd_error;  // the last error line libmtmd logged (it reports failures only there)
ggml_log_level g_mtmd_level = GGML_LOG_LEVEL_INFO;

void mtmd_log(ggml_log_level level, const char * text, void *) {
    if (level != GGML_LOG_LEVEL_CONT) g_mtmd_level = level;
    if (g_mtmd_level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
    if (g_mtmd_level == GGML_LOG_LEVEL_ERROR) {
        // One line: the first line of the message, without the "function: error: " prefix.
        std::string line = text;
        line = line.substr(0, line.find('\n'));
        const size_t at = line.find("error: ");
        if (at != std::string::npos) line = line.substr(at + 7);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        if (!line.empty() && line.rfind("hint:", 0) != 0) g_mtmd_error = line;
    }
}

}  // namespace

class MediaFrontEnd {
  public:
    MediaFrontEnd(const LlamaModel & m, const std::string & mmproj) {
        std::ifstream probe(mmproj, std::ios::binary);
        if (!probe) {
            throw JobError("the " + m.role() + "'s mmproj file " + mmproj + " cannot be read (" +
                               std::strerror(errno) + ")",
                           "pass the audio projector GGUF made for " + m.path() + " as " + m.role() + ".mmproj");
        }
        mtmd_helper_log_set(mtmd_log, nullptr);
        mtmd_context_params p = mtmd_context_params_default();
        // The encoder runs where its model runs (Qwen3-ASR in the paper: drafter on the CPU, target on a GPU).
        p.use_gpu = m.device() != "cpu";
        if (p.use_gpu) p.device = ggml_backend_dev_by_name(m.device().c_str());
        p.n_threads = m.threads();
        p.print_timings = false;
        p.warmup = true;  // the encoder's first graph is built here, not inside a window's prefill
        g_mtmd_error.clear();
        ctx_ = mtmd_init_from_file(mmproj.c_str(), m.raw_model(), p);
        if (ctx_ == nullptr) {
            const bool width = g_mtmd_error.find("mismatch between text model") != std::string::npos;
            const std::string why = g_mtmd_error.empty() ? "" : " (" + g_mtmd_error + ")";
            if (width) {
                throw JobError("the " + m.role() + "'s mmproj " + mmproj + " does not fit " + m.path() + why,
                               "use the mmproj converted with this text model (projection_dim = its embedding width)");
            }
            throw JobError("could not load the " + m.role() + "'s mmproj " + mmproj + " for " + m.path() + why,
                           "is it an audio projector GGUF for this model? the log on stderr says more");
        }
        if (!mtmd_support_audio(ctx_)) {
            mtmd_free(ctx_);
            throw JobError("the " + m.role() + "'s mmproj " + mmproj + " has no audio encoder",
                           "pass an audio projector (e.g. Qwen3-ASR's qwen3a mmproj)");
        }
        if (mtmd_get_audio_sample_rate(ctx_) != 16000) {
            const int rate = mtmd_get_audio_sample_rate(ctx_);
            mtmd_free(ctx_);
            throw JobError("the " + m.role() + "'s mmproj " + mmproj + " expects " + std::to_string(rate) +
                           " Hz audio; windows carry 16000 Hz");
        }
    }
    ~MediaFrontEnd() { mtmd_free(ctx_); }
    mtmd_context * ctx() const { return ctx_; }

  private:
    mtmd_context * ctx_ = nullptr;
};

struct MediaPrompt {
    mtmd_input_chunks * chunks = nullptr;
    size_t last_audio = 0;  // index of the audio chunk; chunks after it are the instruction
    int n_pos = 0;
    int n_audio = 0;
    ~MediaPrompt() { mtmd_input_chunks_free(chunks); }
};

namespace {

std::shared_ptr<MediaPrompt> tokenize_audio(const LlamaModel & m, const Window & w, const std::vector<float> & pcm,
                                            const std::string & text) {
    const std::string marker = mtmd_default_marker();
    const size_t at = text.find(marker);
    if (at == std::string::npos || text.find(marker, at + 1) != std::string::npos) {
        throw JobError("window '" + w.id + "': the prompt text needs exactly one " + marker +
                           " marker (where the audio goes)",
                       "apply the chat template to a user message containing " + marker);
    }
    mtmd_bitmap * bitmap = mtmd_bitmap_init_from_audio(pcm.size(), pcm.data());
    auto prompt = std::make_shared<MediaPrompt>();
    prompt->chunks = mtmd_input_chunks_init();
    mtmd_input_text in{text.c_str(), text.size(), true, true};
    const mtmd_bitmap * bitmaps[] = {bitmap};
    g_mtmd_error.clear();
    const int32_t rc = mtmd_tokenize(m.media()->ctx(), prompt->chunks, &in, bitmaps, 1);
    mtmd_bitmap_free(bitmap);
    if (rc != 0) {
        throw JobError("window '" + w.id + "': libmtmd could not tokenize the audio of " + w.audio_path + " for the " +
                           m.role() + (g_mtmd_error.empty() ? "" : " (" + g_mtmd_error + ")"),
                       "the log on stderr says why");
    }
    for (size_t i = 0; i < mtmd_input_chunks_size(prompt->chunks); i++) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(prompt->chunks, i);
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_AUDIO) {
            prompt->last_audio = i;
            prompt->n_audio += (int) mtmd_input_chunk_get_n_tokens(c);
        }
        prompt->n_pos += (int) mtmd_input_chunk_get_n_pos(c);
    }
    return prompt;
}

// Text chunks go through Model::forward (the same positions as every other forward);
// audio chunks through the helper (encode, then decode the embeddings, 1-D M-RoPE positions).
void eval_chunks(LlamaModel & m, const MediaPrompt & p, size_t from, size_t to) {
    const size_t n = mtmd_input_chunks_size(p.chunks);
    for (size_t i = from; i < to; i++) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(p.chunks, i);
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n_tokens = 0;
            const llama_token * tokens = mtmd_input_chunk_get_tokens_text(c, &n_tokens);
            if (n_tokens > 0) m.forward(tokens, (int) n_tokens, false);
            continue;
        }
        const int n_pos = (int) mtmd_input_chunk_get_n_pos(c);
        if (m.kv_len() + n_pos > m.n_ctx()) {
            throw JobError(m.role() + " context full: " + std::to_string(m.kv_len()) + " + " + std::to_string(n_pos) +
                               " audio positions > n_ctx " + std::to_string(m.n_ctx()),
                           "raise the job's n_ctx");
        }
        llama_pos new_n_past = 0;
        g_mtmd_error.clear();
        const int32_t rc = mtmd_helper_eval_chunk_single(m.media()->ctx(), m.raw_context(), c, m.kv_len(), 0,
                                                         m.n_batch(), i + 1 == n, &new_n_past);
        llama_synchronize(m.raw_context());
        if (rc != 0) {
            throw JobError("the " + m.role() + "'s audio prefill failed (rc " + std::to_string(rc) + ")" +
                           (g_mtmd_error.empty() ? "" : ": " + g_mtmd_error), "the log on stderr says why");
        }
        // Audio chunks advance the position by their token count, also with M-RoPE
        // (mtmd_input_chunk_get_n_pos); n_past is what every rollback counts from.
        m.set_kv_len((int) new_n_past);
    }
}

const MediaPrompt & prompt_of(const Window & w, bool drafter) {
    const auto & p = drafter ? w.drafter_media : w.media;
    if (!p) throw JobError("internal: window '" + w.id + "' has no tokenized audio prompt");
    return *p;
}

}  // namespace

void media_attach(Model & model, std::vector<Window> & windows, bool drafter, int extra, bool resize) {
    LlamaModel & m = static_cast<LlamaModel &>(model);  // format() is gguf: hears_audio() is false
    bool any = false;
    for (const Window & w : windows) any |= w.is_audio();
    if (!any) return;
    if (m.media() == nullptr) {
        const std::string & mmproj = m.mmproj();
        if (mmproj.empty()) {
            throw JobError("window '" + windows[0].id + "' has audio but the " + m.role() + " has no mmproj",
                           "add \"mmproj\": \"<audio projector>.gguf\" to the job's " + m.role());
        }
        m.set_media(std::make_shared<MediaFrontEnd>(m, mmproj));
    }
    std::string cached_path;
    std::vector<float> pcm;
    for (Window & w : windows) {
        if (!w.is_audio()) continue;
        if (w.audio_path != cached_path) {
            pcm = read_samples(w);
            cached_path = w.audio_path;
        }
        auto prompt = tokenize_audio(m, w, pcm, drafter ? w.drafter_prompt_text : w.prompt_text);
        // Placeholder ids: only the length (the KV positions) of an audio prompt is ever used.
        std::vector<llama_token> & ids = drafter ? w.drafter_prompt : w.prompt;
        ids.assign(prompt->n_pos, 0);
        (drafter ? w.drafter_media : w.media) = prompt;
    }
    if (resize) {
        const int need = size_context(windows, extra, drafter);
        if (need > m.n_ctx()) m.resize_context(need);
    }
}

PrefillPart media_prefill_background(Model & model, const Window & w, bool drafter) {
    LlamaModel & m = static_cast<LlamaModel &>(model);
    m.clear();
    PrefillPart part;
    if (!w.is_audio()) return part;
    const MediaPrompt & p = prompt_of(w, drafter);
    const int64_t t0 = now_us();
    eval_chunks(m, p, 0, p.last_audio + 1);
    part.audio_us = now_us() - t0;
    return part;
}

int64_t media_prefill_instruction(Model & model, const Window & w, bool drafter) {
    LlamaModel & m = static_cast<LlamaModel &>(model);
    if (!w.is_audio()) return m.forward(drafter ? w.drafter_prompt : w.prompt, false);
    const MediaPrompt & p = prompt_of(w, drafter);
    const int64_t t0 = now_us();
    eval_chunks(m, p, p.last_audio + 1, mtmd_input_chunks_size(p.chunks));
    return now_us() - t0;
}

int media_tokens(const Window & w, bool drafter) {
    const auto & p = drafter ? w.drafter_media : w.media;
    return p ? p->n_audio : 0;
}

#else  // built without libmtmd (scripts/build-runner --no-mtmd)

class MediaFrontEnd {};
struct MediaPrompt {};

void media_attach(Model &, std::vector<Window> & windows, bool, int, bool) {
    for (const Window & w : windows) {
        if (w.is_audio()) {
            throw JobError("window '" + w.id + "' has audio, but this runner was built without libmtmd",
                           "rebuild with scripts/build-runner (without --no-mtmd)");
        }
    }
}

PrefillPart media_prefill_background(Model & m, const Window &, bool) {
    m.clear();
    return PrefillPart{};
}

int64_t media_prefill_instruction(Model & m, const Window & w, bool drafter) {
    return m.forward(drafter ? w.drafter_prompt : w.prompt, false);
}

int media_tokens(const Window &, bool) { return 0; }

#endif

void attach_audio(Model & m, std::vector<Window> & windows, bool drafter, int extra, bool resize) {
    if (m.hears_audio()) {
        attach_whisper(m, windows, drafter);
    } else {
        media_attach(m, windows, drafter, extra, resize);
    }
}

PrefillPart prefill_background(Model & m, const Window & w, bool drafter) {
    if (!m.hears_audio()) return media_prefill_background(m, w, drafter);
    m.clear();
    PrefillPart part;
    part.audio_us = m.encode_audio(*w.pcm);  // mel spectrogram + encoder: the window's audio prefill
    return part;
}

int64_t prefill_instruction(Model & m, const Window & w, bool drafter) {
    if (!m.hears_audio()) return media_prefill_instruction(m, w, drafter);
    return m.forward(drafter ? w.drafter_prompt : w.prompt, false);  // the task prompt after the audio
}
