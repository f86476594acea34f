#include "engine.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sys/stat.h>

namespace {

bool g_verbose = false;
ggml_log_level g_last_level = GGML_LOG_LEVEL_INFO;

void log_filter(ggml_log_level level, const char * text, void *) {
    // CONT continues the previous message, so it inherits that message's level.
    if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
    if (g_verbose || g_last_level >= GGML_LOG_LEVEL_WARN) {
        std::fputs(text, stderr);
    }
}

bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string device_names() {
    std::string names = "cpu";
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU) {
            names += std::string(", ") + ggml_backend_dev_name(dev);
        }
    }
    return names;
}

}  // namespace

void install_log_filter(bool verbose) {
    g_verbose = verbose;
    llama_log_set(log_filter, nullptr);
}

int64_t now_us() { return ggml_time_us(); }

ModelSpec parse_model_spec(JobObject obj, const std::string & role, int default_threads) {
    ModelSpec spec;
    spec.role = role;
    spec.path = obj.need<std::string>("path");
    spec.threads = obj.get<int>("threads", default_threads);
    spec.device = obj.get<std::string>("device", "cpu");
    obj.done();
    if (spec.threads < 1) throw JobError("job key '" + obj.path() + ".threads' must be >= 1");
    return spec;
}

Model::Model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs)
    : spec_(spec), n_batch_(n_batch), max_outputs_(std::min(max_outputs, n_batch)), n_ctx_(n_ctx) {
    if (!file_exists(spec.path)) {
        throw JobError(spec.role + " model file not found: " + spec.path,
                       "check the path; demo models come from specbench.models.demo_model()");
    }
    // Pinning needs an explicit device list: n_gpu_layers = 0 alone still uses a GPU in the list.
    std::vector<ggml_backend_dev_t> devices;
    llama_model_params mp = llama_model_default_params();
    if (spec.device == "cpu") {
        mp.n_gpu_layers = 0;
    } else {
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(spec.device.c_str());
        if (dev == nullptr) {
            throw JobError("unknown device '" + spec.device + "' for the " + spec.role,
                           "available: " + device_names());
        }
        devices.push_back(dev);
        mp.n_gpu_layers = -1;
        mp.split_mode = LLAMA_SPLIT_MODE_NONE;
    }
    devices.push_back(nullptr);
    mp.devices = devices.data();

    model_ = llama_model_load_from_file(spec.path.c_str(), mp);
    if (model_ == nullptr) {
        throw JobError("could not load the " + spec.role + " model " + spec.path,
                       "is it a GGUF file this llama.cpp supports? the log on stderr says why");
    }
    vocab_ = llama_model_get_vocab(model_);
    n_vocab_ = llama_vocab_n_tokens(vocab_);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) n_ctx;
    cp.n_batch = (uint32_t) n_batch;
    cp.n_ubatch = (uint32_t) n_batch;  // one forward = one graph, so a width-w time is one compute
    cp.n_seq_max = 1;
    cp.n_outputs_max = (uint32_t) max_outputs_;
    cp.n_threads = spec.threads;
    cp.n_threads_batch = spec.threads;  // multi-token forwards use the batch pool
    cp.no_perf = true;
    ctx_ = llama_init_from_model(model_, cp);
    if (ctx_ == nullptr) {
        llama_model_free(model_);
        throw JobError("could not create a context for the " + spec.role + " model (n_ctx " +
                           std::to_string(n_ctx) + ")",
                       "lower n_ctx or free memory; the log on stderr says why");
    }
    n_ctx_ = (int) llama_n_ctx(ctx_);
    batch_ = llama_batch_init(n_batch, 0, 1);
}

Model::~Model() {
    llama_batch_free(batch_);
    if (ctx_) llama_free(ctx_);
    if (model_) llama_model_free(model_);
}

json Model::describe() const {
    char desc[256];
    llama_model_desc(model_, desc, sizeof desc);
    return json{{"model", spec_.role},   {"path", spec_.path},        {"desc", desc},
                {"n_vocab", n_vocab_},   {"n_params", llama_model_n_params(model_)},
                {"size_bytes", llama_model_size(model_)},             {"n_ctx", n_ctx_},
                {"threads", spec_.threads}, {"device", spec_.device}};
}

void Model::decode_chunk(const llama_token * tokens, int n, bool all_logits) {
    batch_.n_tokens = n;
    for (int i = 0; i < n; i++) {
        batch_.token[i] = tokens[i];
        batch_.pos[i] = kv_len_ + i;
        batch_.n_seq_id[i] = 1;
        batch_.seq_id[i][0] = 0;
        batch_.logits[i] = all_logits || i == n - 1;
    }
    int rc = llama_decode(ctx_, batch_);
    if (rc != 0) {
        throw JobError("llama_decode failed for the " + spec_.role + " (rc " + std::to_string(rc) + ", width " +
                           std::to_string(n) + ", depth " + std::to_string(kv_len_) + ")",
                       rc == 1 ? "no KV slot: raise the job's n_ctx" : "the log on stderr says why");
    }
    kv_len_ += n;
}

int64_t Model::forward(const llama_token * tokens, int n, bool all_logits) {
    if (n <= 0) throw JobError("internal: empty forward for the " + spec_.role);
    if (kv_len_ + n > n_ctx_) {
        throw JobError(spec_.role + " context full: " + std::to_string(kv_len_) + " + " + std::to_string(n) +
                           " tokens > n_ctx " + std::to_string(n_ctx_),
                       "raise the job's n_ctx");
    }
    if (all_logits && n > max_outputs_) {
        throw JobError("internal: " + std::to_string(n) + " logit rows exceed max_outputs " +
                       std::to_string(max_outputs_));
    }
    int64_t t0 = now_us();
    for (int i = 0; i < n; i += n_batch_) {
        decode_chunk(tokens + i, std::min(n_batch_, n - i), all_logits);
    }
    llama_synchronize(ctx_);  // decodes may be asynchronous (GPU): stop the clock only when done
    return now_us() - t0;
}

llama_token Model::argmax(int row) const {
    // No softmax here: this runs inside timed decode loops (262k logits for Gemma).
    const float * logits = llama_get_logits_ith(ctx_, row);
    if (logits == nullptr) throw JobError("internal: no logits for row " + std::to_string(row));
    int best = 0;
    for (int i = 1; i < n_vocab_; i++) {
        if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
    }
    return best;
}

Top1 Model::top1(int row) const {
    const float * logits = llama_get_logits_ith(ctx_, row);
    if (logits == nullptr) throw JobError("internal: no logits for row " + std::to_string(row));
    int best = 0;
    float second = -INFINITY;
    for (int i = 1; i < n_vocab_; i++) {
        if (logits[i] > logits[best]) {  // strict: ties keep the lowest id
            second = logits[best];
            best = i;
        } else if (logits[i] > second) {
            second = logits[i];
        }
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab_; i++) sum += std::exp((double) logits[i] - logits[best]);
    return Top1{best, (float) (1.0 / sum), logits[best] - second};
}

void Model::rollback(int keep) {
    if (keep >= kv_len_) return;
    if (!llama_memory_seq_rm(llama_get_memory(ctx_), 0, keep, -1)) {
        throw JobError("internal: the " + spec_.role + " KV cache refused a rollback to " + std::to_string(keep));
    }
    kv_len_ = keep;
}

void Model::clear() {
    llama_memory_clear(llama_get_memory(ctx_), true);
    kv_len_ = 0;
}

void require_same_vocab(const Model & target, const Model & drafter) {
    const int nt = target.n_vocab(), nd = drafter.n_vocab();
    std::string why;
    if (std::abs(nt - nd) > 128) {
        why = "vocabulary sizes " + std::to_string(nt) + " and " + std::to_string(nd);
    } else if (llama_vocab_type(target.vocab()) != llama_vocab_type(drafter.vocab())) {
        why = "vocabulary types differ";
    } else {
        for (int id = 5; id < std::min(nt, nd); id++) {
            if (std::string(llama_vocab_get_text(target.vocab(), id)) != llama_vocab_get_text(drafter.vocab(), id)) {
                why = "token " + std::to_string(id) + " differs";
                break;
            }
        }
    }
    if (!why.empty()) {
        throw JobError("the drafter's vocabulary differs from the target's (" + why + ")",
                       "this runner supports same-vocabulary pairs only; cross-vocabulary mapping is not implemented yet");
    }
}
