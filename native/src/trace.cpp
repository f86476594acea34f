// "trace": what the models decide, free of timing (METHODS 4). Per window: the target's
// greedy y; for every committed prefix y[:t] the drafter's greedy continuation of length
// k_max with top-1 probabilities (enough to replay SD at any width <= k_max + 1 and any
// p_min); and the producer stream, the drafter's own greedy decode from the prompt.
#include "modes.h"

#include <algorithm>

namespace {

// The drafter's greedy continuations of many prefixes. Continuations of neighbouring
// prefixes overlap (whenever the drafter guessed y[t], P[t+1] is P[t] shifted by one), so
// the KV and the top-1 of every position are kept and only what is missing is computed.
class DraftOracle {
  public:
    DraftOracle(Model & m, const std::vector<llama_token> & prompt) : m_(m), n_prompt_((int) prompt.size()) {
        m_.clear();
        m_.forward(prompt, false);
        next_.push_back(m_.top1(-1));
    }

    // Greedy continuation of up to k tokens after prompt + ctx[:n]; ends after an EOG token.
    void continuation(const std::vector<llama_token> & ctx, int n, int k, std::vector<llama_token> & tokens,
                      std::vector<float> & conf) {
        tokens.clear();
        conf.clear();
        extend_to(ctx, n);
        for (int j = n; (int) tokens.size() < k; j++) {
            const Top1 t = next_[j];
            tokens.push_back(t.token);
            conf.push_back(t.prob);
            if (m_.is_eog(t.token) || (int) tokens.size() == k) break;
            if (j < (int) seq_.size() && seq_[j] == t.token) continue;  // already in the KV
            truncate(j);
            feed(&t.token, 1);
        }
    }

    int forwards() const { return forwards_; }

  private:
    // Make prompt + ctx[:n] a prefix of the KV, keeping what already matches.
    void extend_to(const std::vector<llama_token> & ctx, int n) {
        int m = 0;
        while (m < n && m < (int) seq_.size() && seq_[m] == ctx[m]) m++;
        if (m == n) return;
        truncate(m);
        // Logits for every ingested row: each is the top-1 after one more prefix.
        for (int i = m; i < n; i += m_.max_outputs()) {
            feed(ctx.data() + i, std::min(m_.max_outputs(), n - i));
        }
    }

    void truncate(int j) {
        m_.rollback(n_prompt_ + j);
        seq_.resize(j);
        next_.resize(j + 1);
    }

    void feed(const llama_token * tokens, int n) {
        m_.forward(tokens, n, true);
        forwards_++;
        for (int i = 0; i < n; i++) {
            seq_.push_back(tokens[i]);
            next_.push_back(m_.top1(i));
        }
    }

    Model & m_;
    int n_prompt_;
    std::vector<llama_token> seq_;  // tokens after the prompt now in the KV
    std::vector<Top1> next_;        // next_[j]: greedy top-1 after prompt + seq_[:j]
    int forwards_ = 0;
};

json drafts_json(DraftOracle & oracle, const std::vector<llama_token> & y, int k_max) {
    json tokens = json::array(), conf = json::array();
    std::vector<llama_token> c;
    std::vector<float> p;
    for (int t = 0; t < (int) y.size(); t++) {
        oracle.continuation(y, t, k_max, c, p);
        // Pad after an early EOG so that every row has k_max entries.
        c.resize(k_max, -1);
        p.resize(k_max, 0.0f);
        tokens.push_back(c);
        conf.push_back(p);
    }
    return json{{"k_max", k_max}, {"tokens", tokens}, {"conf", conf}};
}

// Same vocabulary: each drafter step yields one target token, so step[i] = i (step 0 is
// the prefill). A cross-vocabulary mapping will make steps and tokens differ.
json producer_json(DraftOracle & oracle, const Model & drafter, int cap) {
    std::vector<llama_token> z;
    std::vector<float> pz;
    oracle.continuation({}, 0, cap, z, pz);
    std::vector<int> step(z.size());
    for (size_t i = 0; i < z.size(); i++) step[i] = (int) i;
    const bool eos = !z.empty() && drafter.is_eog(z.back());
    return json{{"tokens", z}, {"conf", pz}, {"step", step}, {"steps", z.size()}, {"stop", eos ? "eos" : "cap"}};
}

}  // namespace

void run_trace(JobObject & job) {
    CommonOptions common = parse_common(job);
    ModelSpec target_spec = parse_model_spec(job.object("target"), "target", common.threads);
    ModelSpec drafter_spec = parse_model_spec(job.object("drafter"), "drafter", common.threads);
    const int k_max = job.get<int>("k_max", 16);
    const bool with_producer = job.get<bool>("producer", true);
    const bool with_margins = job.get<bool>("margins", false);
    std::vector<Window> windows = parse_windows(job, false);
    job.done();
    if (k_max < 1) throw JobError("job key 'k_max' must be >= 1");

    const int n_ctx_t = common.n_ctx > 0 ? common.n_ctx : size_context(windows, 8, false);
    const int n_ctx_d = common.n_ctx > 0 ? common.n_ctx : size_context(windows, k_max + 8, true);
    emit_event("start", {{"mode", "trace"}, {"windows", windows.size()}, {"k_max", k_max}});
    auto target = load_model(target_spec, n_ctx_t, 512, 1);
    auto drafter = load_model(drafter_spec, n_ctx_d, 512, 64);
    require_same_vocab(*target, *drafter);

    for (const Window & w : windows) {
        GreedyRun g = greedy_target(*target, w, with_margins);
        DraftOracle oracle(*drafter, w.drafter_prompt);
        // Keys as specbench.traces.window_trace_from_dict reads them (less window_sha256,
        // which the Python side computes from the window itself).
        json rec = {{"kind", "trace"},           {"window_id", w.id},
                    {"y", g.y},                  {"stop_reason", g.stop_reason},
                    {"n_prompt", w.prompt.size()}, {"n_prompt_drafter", w.drafter_prompt.size()}};
        // The producer first: its long chain is then reused by P[t] while y follows it.
        json producer = with_producer ? producer_json(oracle, *drafter, w.cap) : json(nullptr);
        rec["drafts"] = drafts_json(oracle, g.y, k_max);
        if (with_producer) rec["producer"] = producer;
        if (with_margins) rec["y_margin"] = g.margin;
        emit_event("trace_stats", {{"window_id", w.id}, {"drafter_forwards", oracle.forwards()}});
        emit_result(rec);
    }
}
