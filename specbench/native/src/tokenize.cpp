// "tokenize" / "detokenize": the model's own tokenizer and chat template, so the Python
// side can build prompt token ids without a tokenizer of its own. Loads the vocabulary only.
#include "modes.h"

#include <sys/stat.h>

#include <cstdlib>

namespace {

struct VocabModel {
    llama_model * model = nullptr;
    explicit VocabModel(const std::string & path) {
        struct stat st;
        if (stat(path.c_str(), &st) != 0) {
            throw JobError("model file not found: " + path, "check the path");
        }
        if (model_format(path, "model") != ModelFormat::gguf) {
            throw JobError("the model " + path + " is a whisper.cpp ggml file where a GGUF (llama.cpp) model is expected",
                           "tokenize and detokenize read GGUF vocabularies; a Whisper window's prompt is the model's own");
        }
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        model = llama_model_load_from_file(path.c_str(), mp);
        if (!model) throw JobError("could not load the vocabulary of " + path, "the log on stderr says why");
    }
    ~VocabModel() { llama_model_free(model); }
    const llama_vocab * vocab() const { return llama_model_get_vocab(model); }
};

// `name`: a llama.cpp built-in template name ("chatml", "gemma", ...) or a template
// string; empty: the model's own (some repackaged GGUFs carry none).
std::string apply_template(const llama_model * model, const std::string & name, const std::string & system,
                           const std::string & user) {
    const char * tmpl = name.empty() ? llama_model_chat_template(model, nullptr) : name.c_str();
    if (tmpl == nullptr) {
        throw JobError("the model has no chat template",
                       "name one with \"template\" (e.g. \"gemma\", \"chatml\"), or pass \"chat\": false");
    }
    std::vector<llama_chat_message> msgs;
    if (!system.empty()) msgs.push_back({"system", system.c_str()});
    msgs.push_back({"user", user.c_str()});
    std::vector<char> buf(4 * (system.size() + user.size()) + 1024);
    int n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
    if (n > (int) buf.size()) {
        buf.resize(n + 1);
        n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
    }
    if (n < 0) {
        throw JobError("llama.cpp cannot apply the chat template" + (name.empty() ? std::string() : " '" + name + "'"),
                       "name a built-in one with \"template\" (e.g. \"chatml\", \"gemma\"), or pass \"chat\": false");
    }
    return std::string(buf.data(), n);
}

// `<arch>.context_length` of the GGUF metadata (a vocabulary-only load reads no hparams); 0: not recorded
int context_length(const llama_model * model) {
    char buf[128];
    if (llama_model_meta_val_str(model, "general.architecture", buf, sizeof buf) < 0) return 0;
    const std::string key = std::string(buf) + ".context_length";
    if (llama_model_meta_val_str(model, key.c_str(), buf, sizeof buf) < 0) return 0;
    return std::atoi(buf);
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    std::vector<llama_token> out(text.size() + 8);
    int n = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    }
    if (n < 0) throw JobError("tokenization failed");
    out.resize(n);
    return out;
}

}  // namespace

void run_tokenize(JobObject & job) {
    std::string path = job.object("model").need<std::string>("path");
    auto texts = job.need<std::vector<std::string>>("texts");
    const bool chat = job.get<bool>("chat", false);
    const std::string system = job.get<std::string>("system", "");
    const std::string tmpl = job.get<std::string>("template", "");
    const bool add_special = job.get<bool>("add_special", true);
    const bool parse_special = job.get<bool>("parse_special", true);
    job.done();

    VocabModel vm(path);
    // the context the model was trained with: a prompt and its cap beyond it are refused before any decode
    const int n_ctx_train = context_length(vm.model);
    for (size_t i = 0; i < texts.size(); i++) {
        std::string text = chat ? apply_template(vm.model, tmpl, system, texts[i]) : texts[i];
        emit_result({{"kind", "tokens"}, {"index", i}, {"text", text},
                     {"tokens", tokenize(vm.vocab(), text, add_special, parse_special)}, {"n_ctx_train", n_ctx_train}});
    }
}

void run_detokenize(JobObject & job) {
    std::string path = job.object("model").need<std::string>("path");
    auto lists = job.need<std::vector<std::vector<int>>>("tokens");
    const bool special = job.get<bool>("special", false);
    job.done();

    VocabModel vm(path);
    const int n_vocab = llama_vocab_n_tokens(vm.vocab());
    for (size_t i = 0; i < lists.size(); i++) {
        for (int t : lists[i]) {
            if (t < 0 || t >= n_vocab) throw JobError("token id " + std::to_string(t) + " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
        }
        std::vector<char> buf(lists[i].size() * 16 + 64);
        int n = llama_detokenize(vm.vocab(), lists[i].data(), (int32_t) lists[i].size(), buf.data(), (int32_t) buf.size(), false, special);
        if (n < 0) {
            buf.resize(-n);
            n = llama_detokenize(vm.vocab(), lists[i].data(), (int32_t) lists[i].size(), buf.data(), (int32_t) buf.size(), false, special);
        }
        emit_result({{"kind", "text"}, {"index", i}, {"text", std::string(buf.data(), std::max(n, 0))}});
    }
}
