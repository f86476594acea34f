#include "engine.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "whisper.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <sched.h>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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

std::vector<int> read_affinity(pid_t tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(tid, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    return cpus;
}

std::mutex g_pin_mutex;
json g_pinned = json::array();

// Where ggml runs a forward's threads as an OpenMP team (the host build), the calling thread's team is pinned
// one worker to a CPU of the lane, worker i to cpus[i % n]; the calling thread keeps the lane's whole set. ggml's
// forwards reuse the same team, member i on the same pool thread. Unpinned, the scheduler could leave two
// threads of one lane on one CPU while the other lane's ran on the other, for tens of milliseconds after the
// other lane stopped: in `shared` a forward straddling the end of an AS2D producer ran 1.4-1.5 times what
// processor sharing gives it, and serial SD's forwards 4-15% above their cells (docs/MEASUREMENTS.md,
// "Pinning each lane's OpenMP workers"). Builds without OpenMP (Android, aarch64) start ggml's own threads per
// forward and are not pinned here.
void pin_team(const std::vector<int> & cpus, int threads) {
#ifdef _OPENMP
    if (threads < 2 || cpus.size() < 2) return;
#pragma omp parallel num_threads(threads)
    {
        const int i = omp_get_thread_num();
        if (i > 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[(size_t) i % cpus.size()], &one);
            sched_setaffinity(0, sizeof one, &one);  // a refusal leaves the worker on the lane's set
        }
    }
#else
    (void) cpus;
    (void) threads;
#endif
}

}  // namespace

void pin_lane(const std::string & role, const std::vector<int> & cpus, int threads) {
    if (cpus.empty()) return;
    // The lane's thread keeps its mask between forwards; only a switch costs a syscall.
    thread_local std::vector<int> current;
    thread_local std::set<std::string> recorded;
    if (cpus != current) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c : cpus) {
            if (c < 0 || c >= CPU_SETSIZE) throw JobError("the " + role + " lane names CPU " + std::to_string(c));
            CPU_SET(c, &set);
        }
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            std::string list;
            for (int c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
            throw JobError("could not pin the " + role + " lane to CPUs " + list + ": " + std::strerror(errno),
                           "name CPUs this device lets the runner use (see the placement)");
        }
        current = cpus;
        pin_team(cpus, threads);
    }
    if (recorded.insert(role).second) {
        std::lock_guard<std::mutex> lock(g_pin_mutex);
        g_pinned.push_back(json{{"lane", role},
                                {"cpus", cpus},
                                {"threads", threads},
                                {"tid", (long) syscall(SYS_gettid)},
                                {"read_back", read_affinity(0)}});
    }
}

json pinning_report() {
    json tasks = json::array();
    if (DIR * dir = opendir("/proc/self/task")) {
        while (dirent * e = readdir(dir)) {
            if (e->d_name[0] == '.') continue;
            const pid_t tid = (pid_t) std::atol(e->d_name);
            tasks.push_back(json{{"tid", (long) tid}, {"cpus", read_affinity(tid)}});
        }
        closedir(dir);
    }
    std::lock_guard<std::mutex> lock(g_pin_mutex);
    return json{{"lanes", g_pinned}, {"threads", tasks}};
}

void install_log_filter(bool verbose) {
    g_verbose = verbose;
    llama_log_set(log_filter, nullptr);
    whisper_log_set(log_filter, nullptr);
}

int64_t now_us() { return ggml_time_us(); }

ModelSpec parse_model_spec(JobObject obj, const std::string & role, int default_threads) {
    ModelSpec spec;
    spec.role = role;
    spec.path = obj.need<std::string>("path");
    spec.threads = obj.get<int>("threads", default_threads);
    spec.device = obj.get<std::string>("device", "cpu");
    spec.mmproj = obj.get<std::string>("mmproj", "");
    spec.cpus = obj.get<std::vector<int>>("cpus", {});
    obj.done();
    if (spec.threads < 1) throw JobError("job key '" + obj.path() + ".threads' must be >= 1");
    return spec;
}

ModelFormat model_format(const std::string & path, const std::string & role) {
    if (!file_exists(path)) {
        throw JobError(role + " model file not found: " + path,
                       "check the path; demo models come from specbench.world.demo_models.demo_model()");
    }
    char magic[4] = {0, 0, 0, 0};
    FILE * f = std::fopen(path.c_str(), "rb");
    const size_t n = f ? std::fread(magic, 1, 4, f) : 0;
    if (f) std::fclose(f);
    if (n == 4 && std::memcmp(magic, "GGUF", 4) == 0) return ModelFormat::gguf;
    if (n == 4 && std::memcmp(magic, "lmgg", 4) == 0) return ModelFormat::whisper;  // 0x67676d6c little-endian
    throw JobError("the " + role + " model " + path + " is neither a GGUF file nor a whisper.cpp ggml file (magic '" +
                       std::string(magic, n) + "')",
                   "pass a llama.cpp GGUF or a whisper.cpp model (specbench.world.demo_models.demo_model)");
}

const char * format_name(ModelFormat f) { return f == ModelFormat::gguf ? "GGUF (llama.cpp)" : "whisper.cpp ggml"; }

void require_same_format(const ModelSpec & target, const ModelSpec & drafter) {
    const ModelFormat t = model_format(target.path, target.role), d = model_format(drafter.path, drafter.role);
    if (t != d) {
        throw JobError(std::string("the drafter ") + drafter.path + " is a " + format_name(d) + " model but the target " +
                           target.path + " is a " + format_name(t) + " model",
                       "pair a whisper.cpp drafter with a whisper.cpp target and a GGUF drafter with a GGUF target");
    }
}

std::unique_ptr<Model> open_model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs) {
    if (model_format(spec.path, spec.role) == ModelFormat::whisper) return open_whisper_model(spec, n_ctx, max_outputs);
    return std::make_unique<LlamaModel>(spec, n_ctx, n_batch, max_outputs);
}

int64_t Model::encode_audio(const std::vector<float> &) {
    throw JobError("internal: the " + spec_.role + " (" + spec_.path + ") does not encode audio itself");
}

void Model::encode_audio_ahead(const std::vector<float> & pcm) {
    ahead_us_ = -1;
    const int64_t us = encode_audio(pcm);
    if (!audio_reused_) ahead_us_ = us;
}

LlamaModel::LlamaModel(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs)
    : Model(spec, n_ctx, n_batch, max_outputs) {
    if (model_format(spec.path, spec.role) != ModelFormat::gguf) {
        throw JobError("the " + spec.role + " model " + spec.path + " is a whisper.cpp ggml file where a GGUF (llama.cpp) "
                       "model is expected", "this job runs llama.cpp models only");
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

    try {
        create_context(n_ctx);
    } catch (...) {
        llama_model_free(model_);
        throw;
    }
    batch_ = llama_batch_init(n_batch, 0, 1);
}

void LlamaModel::create_context(int n_ctx) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) n_ctx;
    cp.n_batch = (uint32_t) n_batch_;
    cp.n_ubatch = (uint32_t) n_batch_;  // one forward = one graph, so a width-w time is one compute
    cp.n_seq_max = 1;
    cp.n_outputs_max = (uint32_t) max_outputs_;
    cp.n_threads = spec_.threads;
    cp.n_threads_batch = spec_.threads;  // multi-token forwards use the batch pool
    cp.no_perf = true;
    ctx_ = llama_init_from_model(model_, cp);
    if (ctx_ == nullptr) {
        throw JobError("could not create a context for the " + spec_.role + " model (n_ctx " +
                           std::to_string(n_ctx) + ")",
                       "lower n_ctx or free memory; the log on stderr says why");
    }
    n_ctx_ = (int) llama_n_ctx(ctx_);
}

void LlamaModel::resize_context(int n_ctx) {
    if (ctx_) llama_free(ctx_);
    ctx_ = nullptr;
    kv_len_ = 0;
    create_context(n_ctx);
}

LlamaModel::~LlamaModel() {
    media_.reset();  // the mtmd context refers to the model
    llama_batch_free(batch_);
    if (ctx_) llama_free(ctx_);
    if (model_) llama_model_free(model_);
}

json LlamaModel::describe() const {
    char desc[256];
    llama_model_desc(model_, desc, sizeof desc);
    json j = json{{"model", spec_.role},   {"path", spec_.path},        {"desc", desc},
                {"n_vocab", n_vocab_},   {"n_params", llama_model_n_params(model_)},
                {"size_bytes", llama_model_size(model_)},             {"n_ctx", n_ctx_},
                {"threads", spec_.threads}, {"device", spec_.device},  {"cpus", spec_.cpus}};
    if (!spec_.mmproj.empty()) j["mmproj"] = spec_.mmproj;
    return j;
}

// Rows i >= first_out get logits (0: all rows, n - 1: the last only).
void LlamaModel::decode_chunk(const llama_token * tokens, int n, int first_out) {
    batch_.n_tokens = n;
    for (int i = 0; i < n; i++) {
        batch_.token[i] = tokens[i];
        batch_.pos[i] = kv_len_ + i;
        batch_.n_seq_id[i] = 1;
        batch_.seq_id[i][0] = 0;
        batch_.logits[i] = i >= first_out;
    }
    int rc = llama_decode(ctx_, batch_);
    if (rc != 0) {
        throw JobError("llama_decode failed for the " + spec_.role + " (rc " + std::to_string(rc) + ", width " +
                           std::to_string(n) + ", depth " + std::to_string(kv_len_) + ")",
                       rc == 1 ? "no KV slot: raise the job's n_ctx" : "the log on stderr says why");
    }
    kv_len_ += n;
}

int LlamaModel::check_fits(int n, bool one_batch) const {
    if (kv_len_ + n > n_ctx_) {
        throw JobError(spec_.role + " context full: " + std::to_string(kv_len_) + " + " + std::to_string(n) +
                           " tokens > n_ctx " + std::to_string(n_ctx_),
                       "raise the job's n_ctx");
    }
    const int batch = std::min(n_batch_, (int) llama_n_batch(ctx_));
    if (one_batch && n > batch) {
        throw JobError(spec_.role + " forward of width " + std::to_string(n) + " exceeds the batch of " +
                           std::to_string(batch) + " tokens (llama.cpp caps the batch at the job's n_ctx)",
                       "raise the job's n_ctx to at least the widest forward plus its depth");
    }
    return batch;
}

int64_t LlamaModel::forward(const llama_token * tokens, int n, bool all_logits) {
    if (n <= 0) throw JobError("internal: empty forward for the " + spec_.role);
    const int batch = check_fits(n, all_logits);
    if (all_logits && n > max_outputs_) {
        throw JobError("internal: " + std::to_string(n) + " logit rows exceed max_outputs " +
                       std::to_string(max_outputs_));
    }
    pin();
    const int64_t t0 = last_forward_start_us_ = now_us();
    for (int i = 0; i < n; i += batch) {
        const int len = std::min(batch, n - i);
        decode_chunk(tokens + i, len, all_logits ? 0 : len - 1);
    }
    llama_synchronize(ctx_);  // decodes may be asynchronous (GPU): stop the clock only when done
    return now_us() - t0;
}

int64_t LlamaModel::forward_last(const llama_token * tokens, int n, int n_out) {
    if (n <= 0 || n_out < 1 || n_out > n) throw JobError("internal: bad forward_last for the " + spec_.role);
    if (n_out > max_outputs_) {
        throw JobError("internal: " + std::to_string(n_out) + " logit rows exceed max_outputs " +
                       std::to_string(max_outputs_));
    }
    check_fits(n, true);
    pin();
    const int64_t t0 = last_forward_start_us_ = now_us();
    decode_chunk(tokens, n, n - n_out);
    llama_synchronize(ctx_);
    return now_us() - t0;
}

const float * LlamaModel::logits(int row) const {
    const float * l = llama_get_logits_ith(ctx_, row);
    if (l == nullptr) throw JobError("internal: no logits for row " + std::to_string(row));
    return l;
}

llama_token Model::argmax(int row) const {
    // No softmax here: this runs inside timed decode loops (262k logits for Gemma).
    const float * l = logits(row);
    int best = 0;
    for (int i = 1; i < n_vocab_; i++) {
        if (l[i] > l[best]) best = i;  // strict: ties keep the lowest id
    }
    return best;
}

Top1 Model::top1(int row) const {
    const float * l = logits(row);
    int best = 0;
    float second = -INFINITY;
    for (int i = 1; i < n_vocab_; i++) {
        if (l[i] > l[best]) {  // strict: ties keep the lowest id
            second = l[best];
            best = i;
        } else if (l[i] > second) {
            second = l[i];
        }
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab_; i++) sum += std::exp((double) l[i] - l[best]);
    return Top1{best, 1.0 / sum, l[best] - second};
}

void LlamaModel::rollback(int keep) {
    if (keep >= kv_len_) return;
    if (!llama_memory_seq_rm(llama_get_memory(ctx_), 0, keep, -1)) {
        throw JobError("internal: the " + spec_.role + " KV cache refused a rollback to " + std::to_string(keep));
    }
    kv_len_ = keep;
}

void LlamaModel::clear() {
    llama_memory_clear(llama_get_memory(ctx_), true);
    kv_len_ = 0;
}

std::string LlamaModel::piece(llama_token t, bool special) const {
    char buf[256];
    int n = llama_token_to_piece(vocab_, t, buf, sizeof buf, 0, special);
    if (n >= 0) return std::string(buf, n);
    std::string big(-n, '\0');
    n = llama_token_to_piece(vocab_, t, big.data(), (int32_t) big.size(), 0, special);
    return big.substr(0, std::max(n, 0));
}

std::string Model::detokenize(const std::vector<llama_token> & tokens, bool special) const {
    std::string out;
    for (llama_token t : tokens) out += piece(t, special);
    return out;
}

std::vector<llama_token> LlamaModel::tokenize(const std::string & text, bool parse_special) const {
    std::vector<llama_token> out(text.size() + 8);
    int n = llama_tokenize(vocab_, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), false,
                           parse_special);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab_, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), false,
                           parse_special);
    }
    if (n < 0) throw JobError("the " + spec_.role + " tokenizer failed on a mapped text of " + std::to_string(text.size()) + " bytes");
    out.resize(n);
    return out;
}

void Model::build_byte_tokens() const {
    if (!byte_tokens_.empty()) return;
    byte_tokens_.assign(256, -1);
    for (llama_token t = 0; t < n_vocab_; t++) {
        const std::string p = piece(t, false);
        if (p.size() == 1 && byte_tokens_[(unsigned char) p[0]] < 0) byte_tokens_[(unsigned char) p[0]] = t;
    }
}

llama_token LlamaModel::end_token() const {
    const llama_token eot = llama_vocab_eot(vocab_);
    return eot >= 0 ? eot : llama_vocab_eos(vocab_);
}

std::string vocab_difference(const Model & target, const Model & drafter) {
    const int nt = target.vocab_size(), nd = drafter.vocab_size();
    std::string why;
    if (std::abs(nt - nd) > 128) {
        why = "vocabulary sizes " + std::to_string(nt) + " and " + std::to_string(nd);
    } else if (target.vocab_kind() != drafter.vocab_kind()) {
        why = "vocabulary types differ";
    } else {
        for (int id = 5; id < std::min(nt, nd); id++) {
            if (target.token_text(id) != drafter.token_text(id)) {
                why = "token " + std::to_string(id) + " differs";
                break;
            }
        }
    }
    return why;
}

void require_same_vocab(const Model & target, const Model & drafter) {
    const std::string why = vocab_difference(target, drafter);
    if (!why.empty()) {
        throw JobError("the drafter's vocabulary differs from the target's (" + why + ")",
                       "this method needs a same-vocabulary drafter (sd, as2d and trace map other vocabularies through text)");
    }
}
