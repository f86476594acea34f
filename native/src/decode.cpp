// "decode": really run a method on each window and time it. Target-only greedy, or
// serial speculative decoding (METHODS 3.2): the drafter ingests the committed tokens it
// lacks, drafts k = W-1 tokens one forward each, the target verifies [root, c0..] in one
// forward with logits for every row, and both KV caches roll back to the committed prefix.
#include "modes.h"

#include <algorithm>

namespace {

struct Method {
    std::string name;   // "target" | "sd"
    int width = 1;      // sd: physical verification width W = k + 1
    double p_min = 0.0; // sd: stop drafting below this top-1 probability
    json to_json() const {
        if (name == "target") return json{{"name", name}};
        return json{{"name", name}, {"width", width}, {"p_min", p_min}};
    }
};

Method parse_method(JobObject mo) {
    Method m;
    m.name = mo.need<std::string>("name");
    if (m.name == "sd") {
        m.width = mo.need<int>("width");
        m.p_min = mo.get<double>("p_min", 0.0);
        if (m.width < 2) throw JobError(mo.path() + ".width must be >= 2 (one root + at least one draft)");
    } else if (m.name != "target") {
        throw JobError("unknown method '" + m.name + "'", "available: sd, target");
    }
    mo.done();
    return m;
}

struct DecodeRun {
    std::vector<llama_token> tokens;
    std::string stop_reason;
    int64_t prefill_us = 0;  // all initial prefills, before the decode clock starts
    int64_t decode_us = 0;
    std::vector<Op> ops;
};

// State of one serial SD window. Positions: the target's KV holds prompt + y[:t-1] (the
// root y[t-1] is fed by the next verification); the drafter's holds its prompt + y[:have].
class SpecDecoder {
  public:
    SpecDecoder(Model & target, Model & drafter, const Window & w, const Method & m)
        : target_(target), drafter_(drafter), w_(w), m_(m) {}

    DecodeRun run() {
        DecodeRun r;
        target_.clear();
        drafter_.clear();
        r.prefill_us = target_.forward(w_.prompt, false) + drafter_.forward(w_.drafter_prompt, false);
        const int64_t start = now_us();
        y_.push_back(target_.argmax(-1));
        while (!target_.is_eog(y_.back()) && (int) y_.size() < w_.cap) {
            round(r.ops);
        }
        r.decode_us = now_us() - start;
        r.stop_reason = target_.is_eog(y_.back()) ? "eos" : "cap";
        r.tokens = y_;
        return r;
    }

  private:
    // Drafter: ingest the committed tokens it lacks (one forward), then draft greedily.
    std::vector<llama_token> draft(std::vector<Op> & ops) {
        const int t = (int) y_.size();
        const int k_max = std::min(m_.width - 1, w_.cap - t);  // drafts past the cap are wasted
        int depth = drafter_.kv_len();
        std::vector<llama_token> lacking(y_.begin() + have_, y_.end());
        ops.push_back(Op{"drafter", (int) lacking.size(), depth, -1, drafter_.forward(lacking, false)});
        have_ = t;
        std::vector<llama_token> c;
        fed_ = 0;
        Top1 next = next_draft();
        while ((int) c.size() < k_max && next.prob >= m_.p_min) {
            c.push_back(next.token);
            // Nothing follows an EOG, and the last draft needs no forward of its own.
            if (drafter_.is_eog(next.token) || (int) c.size() == k_max) break;
            depth = drafter_.kv_len();
            ops.push_back(Op{"drafter", 1, depth, -1, drafter_.forward(&next.token, 1, false)});
            fed_++;
            next = next_draft();
        }
        return c;
    }

    // The softmax is needed only for the confidence stop; skip it in the timed loop otherwise.
    Top1 next_draft() const {
        return m_.p_min > 0.0 ? drafter_.top1(-1) : Top1{drafter_.argmax(-1), 1.0f, 0.0f};
    }

    void round(std::vector<Op> & ops) {
        const int t = (int) y_.size();
        std::vector<llama_token> c = draft(ops);

        std::vector<llama_token> batch = {y_.back()};
        batch.insert(batch.end(), c.begin(), c.end());
        const int depth = target_.kv_len();
        const int64_t us = target_.forward(batch, true);

        // Accept the longest prefix of c the target agrees with; an accepted EOG ends it.
        int a = 0;
        bool ended = false;
        while (a < (int) c.size() && c[a] == target_.argmax(a)) {
            y_.push_back(c[a++]);
            if (target_.is_eog(y_.back())) {
                ended = true;
                break;
            }
        }
        // Correction (or bonus after full acceptance) from row a, unless the cap is reached.
        if (!ended && (int) y_.size() < w_.cap) y_.push_back(target_.argmax(a));
        ops.push_back(Op{"target", (int) batch.size(), depth, a, us});

        // Roll back: the target keeps prompt + y[:n-1]; the drafter keeps what matches y.
        const int n = (int) y_.size();
        target_.rollback((int) w_.prompt.size() + n - 1);
        have_ = t + std::min(a, fed_);
        drafter_.rollback((int) w_.drafter_prompt.size() + have_);
    }

    Model & target_;
    Model & drafter_;
    const Window & w_;
    const Method & m_;
    std::vector<llama_token> y_;
    int have_ = 0;  // committed tokens already in the drafter's KV
    int fed_ = 0;   // drafts of this round fed to the drafter
};

DecodeRun target_only(Model & target, const Window & w) {
    GreedyRun g = greedy_target(target, w, false);
    return DecodeRun{g.y, g.stop_reason, g.prefill_us, g.decode_us, g.ops};
}

// First position where the run differs from the reference y, or -1 if identical.
int first_divergence(const std::vector<llama_token> & got, const std::vector<llama_token> & ref) {
    const size_t n = std::min(got.size(), ref.size());
    for (size_t i = 0; i < n; i++) {
        if (got[i] != ref[i]) return (int) i;
    }
    return got.size() == ref.size() ? -1 : (int) n;
}

json token_at(const std::vector<llama_token> & v, int i) { return i < (int) v.size() ? json(v[i]) : json(nullptr); }

void report(const Window & w, const Method & m, const DecodeRun & r) {
    json rec = {{"kind", "decode"}, {"window_id", w.id}, {"method", m.to_json()}};
    if (!w.reference.empty()) {
        const int pos = first_divergence(r.tokens, w.reference);
        if (pos >= 0) {
            // Lossless contract: a diverging window reports where, never a throughput.
            rec["kind"] = "divergence";
            rec.update({{"position", pos}, {"expected", token_at(w.reference, pos)}, {"got", token_at(r.tokens, pos)}});
            emit_result(rec);
            return;
        }
    }
    json ops = json::array();
    for (const Op & op : r.ops) ops.push_back(op_json(op));
    rec.update({{"tokens", r.tokens},
                {"stop_reason", r.stop_reason},
                {"n_prompt", w.prompt.size()},
                {"n_prompt_drafter", w.drafter_prompt.size()},
                {"prefill_s", r.prefill_us * 1e-6},
                {"decode_s", r.decode_us * 1e-6},
                {"ops", ops}});
    emit_result(rec);
}

// Untimed forwards so that the first window does not pay for page faults and graph setup.
void warm(Model & m, int width) {
    std::vector<llama_token> tokens(width, 0);
    m.clear();
    m.forward(tokens, true);
    m.clear();
}

}  // namespace

void run_decode(JobObject & job) {
    CommonOptions common = parse_common(job);
    ModelSpec target_spec = parse_model_spec(job.object("target"), "target", common.threads);
    const bool has_drafter = job.has("drafter");
    ModelSpec drafter_spec;
    if (has_drafter) drafter_spec = parse_model_spec(job.object("drafter"), "drafter", common.threads);
    std::vector<Method> methods;
    for (JobObject & mo : job.objects("methods")) methods.push_back(parse_method(mo));
    std::vector<Window> windows = parse_windows(job, true);
    const bool warmup = job.get<bool>("warmup", true);
    job.done();

    int max_w = 1;
    for (const Method & m : methods) max_w = std::max(max_w, m.width);
    if (max_w > 1 && !has_drafter) throw JobError("method sd needs a drafter", "add \"drafter\": {\"path\": ...} to the job");

    const int n_ctx_t = common.n_ctx > 0 ? common.n_ctx : size_context(windows, max_w + 8, false);
    const int n_ctx_d = common.n_ctx > 0 ? common.n_ctx : size_context(windows, max_w + 8, true);
    emit_event("start", {{"mode", "decode"}, {"windows", windows.size()}, {"methods", methods.size()}});
    auto target = load_model(target_spec, n_ctx_t, 512, max_w);
    std::unique_ptr<Model> drafter;
    if (max_w > 1) {
        drafter = load_model(drafter_spec, n_ctx_d, 512, 1);
        require_same_vocab(*target, *drafter);
    }
    if (warmup) {
        warm(*target, max_w);
        if (drafter) warm(*drafter, 1);
    }
    for (const Window & w : windows) {
        for (const Method & m : methods) {
            DecodeRun r = m.name == "target" ? target_only(*target, w) : SpecDecoder(*target, *drafter, w, m).run();
            report(w, m, r);
        }
    }
}
