// "trace": what the models decide, free of timing (docs/METHODS.md §3 Traces). Per window: the target's
// greedy y; for every committed prefix y[:t] the drafter's greedy continuation of length
// k_max with top-1 probabilities (enough to replay SD at any width <= k_max + 1 and any
// p_min); and the producer stream, the drafter's own greedy decode from the prompt.
#include "modes.h"
#include "audio.h"
#include "lookup.h"
#include "vocabmap.h"

#include <algorithm>
#include <cstdio>

namespace {

// The drafter's greedy continuations of many prefixes. Continuations of neighbouring
// prefixes overlap (whenever the drafter guessed y[t], P[t+1] is P[t] shifted by one), so
// the KV and the top-1 of every position are kept and only what is missing is computed.
class DraftOracle {
  public:
    DraftOracle(Model & m, const Window & w) : m_(m), n_prompt_((int) w.drafter_prompt.size()) {
        prefill_background(m_, w, true);  // clears the KV first
        prefill_instruction(m_, w, true);
        next_.push_back(m_.top1(-1));
    }

    // Greedy continuation of up to k tokens after prompt + ctx[:n]; ends after an EOG token,
    // and after the first token whose probability is below min_conf (included).
    void continuation(const std::vector<llama_token> & ctx, int n, int k, std::vector<llama_token> & tokens,
                      std::vector<double> & conf, double min_conf = 0.0) {
        tokens.clear();
        conf.clear();
        if (k <= 0) return;
        extend_to(ctx, n);
        for (int j = n; (int) tokens.size() < k; j++) {
            const Top1 t = next_[j];
            tokens.push_back(t.token);
            conf.push_back(t.prob);
            if (m_.is_eog(t.token) || (int) tokens.size() == k || t.prob < min_conf) break;
            if (j < (int) seq_.size() && seq_[j] == t.token) continue;  // already in the KV
            truncate(j);
            feed(&t.token, 1);
        }
    }

    // Top-1 after prompt + ctx[:j] for j = from..n (n - from + 1 entries).
    std::vector<Top1> predictions(const std::vector<llama_token> & ctx, int from, int n) {
        extend_to(ctx, n);
        return std::vector<Top1>(next_.begin() + from, next_.begin() + n + 1);
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

// The drafter's continuations of every committed prefix, in the target's vocabulary.
struct DraftTable {
    std::vector<std::vector<llama_token>> tokens;  // N rows of up to k_max (shorter after an EOG)
    std::vector<std::vector<double>> conf;
    // Cross vocabulary: what the decoder's drafter forwards depend on (decode.cpp
    // CrossSpecDecoder) — per row, the drafter step that made each mapped token stable and
    // the drafter tokens pushed; per prefix, y[:t] as drafter tokens, as a delta from y[:t-1]'s.
    std::vector<std::vector<int>> step;
    std::vector<std::vector<llama_token>> drafter_tokens;
    std::vector<int> context_keep;
    std::vector<std::vector<llama_token>> context_append;
};

// Same vocabulary: row t = the drafter's greedy k_max tokens after prompt + y[:t].
// Cross vocabulary: the drafter continues prompt + (y[:t] as drafter tokens) and a fresh
// StreamMapper turns its tokens into target tokens (at most max(96, 4 k_max + 16) drafter
// tokens per row; the decoder drafts with the same rule).
DraftTable draft_table(DraftOracle & oracle, const Model & target, const Model & drafter,
                       const std::vector<llama_token> & y, int k_max, bool cross) {
    DraftTable table;
    std::vector<llama_token> c;
    std::vector<double> p;
    std::vector<llama_token> prev_ctx;
    for (int t = 0; t < (int) y.size(); t++) {
        if (!cross) {
            oracle.continuation(y, t, k_max, c, p);
        } else {
            const std::vector<llama_token> ctx = target_to_drafter(target, drafter, y, t);
            const int max_steps = std::max(96, 4 * k_max + 16);
            StreamMapper map(target, drafter);
            std::vector<llama_token> d;
            std::vector<double> dp;
            int fed = 0;
            for (int k = std::min(2 * k_max + 2, max_steps);; k = std::min(2 * k, max_steps)) {
                oracle.continuation(ctx, (int) ctx.size(), k, d, dp);
                for (; fed < (int) d.size() && (int) map.tokens.size() < k_max && !map.ended(); fed++) {
                    map.push(d[fed], dp[fed], fed);
                }
                if ((int) map.tokens.size() >= k_max || map.ended()) break;
                if ((int) d.size() < k || k == max_steps) {  // the drafter ended (EOG) or the step limit
                    map.finish(fed - 1);  // at the last pushed step, as the decoder flushes
                    break;
                }
            }
            c.assign(map.tokens.begin(), map.tokens.begin() + std::min<size_t>(k_max, map.tokens.size()));
            p.assign(map.conf.begin(), map.conf.begin() + c.size());
            table.step.emplace_back(map.step.begin(), map.step.begin() + c.size());
            table.drafter_tokens.emplace_back(d.begin(), d.begin() + fed);
            size_t keep = 0;
            while (keep < prev_ctx.size() && keep < ctx.size() && prev_ctx[keep] == ctx[keep]) keep++;
            table.context_keep.push_back((int) keep);
            table.context_append.emplace_back(ctx.begin() + keep, ctx.end());
            prev_ctx = ctx;
        }
        table.tokens.push_back(c);
        table.conf.push_back(p);
    }
    return table;
}

// The lookup drafter's rows (docs/METHODS.md §2.7 Prompt-lookup drafting): row t = prompt_lookup over prompt + y[:t],
// at most k_max tokens; no model, so every confidence is 1.
DraftTable lookup_table(const Window & w, const std::vector<llama_token> & y, int k_max) {
    DraftTable table;
    std::vector<llama_token> ctx = w.prompt;
    for (int t = 0; t < (int) y.size(); t++) {
        if (t > 0) ctx.push_back(y[t - 1]);
        table.tokens.push_back(prompt_lookup(ctx.data(), (int) ctx.size(), k_max));
        table.conf.emplace_back(table.tokens.back().size(), 1.0);
    }
    return table;
}

// The lookup drafter's producer stream (decode.cpp run_as2d_input): the window's input, at most
// cap tokens, all at step 0 (no forward makes them), confidence 1.
json input_producer_json(const Window & w) {
    const std::vector<llama_token> z(w.input.begin(), w.input.begin() + std::min((int) w.input.size(), w.cap));
    return json{{"tokens", z}, {"conf", std::vector<double>(z.size(), 1.0)}, {"step", std::vector<int>(z.size(), 0)},
                {"steps", 1}, {"stop", "eos"}};
}

json drafts_json(const DraftTable & table, int k_max) {
    json tokens = json::array(), conf = json::array();
    for (size_t t = 0; t < table.tokens.size(); t++) {
        // Pad after an early EOG so that every row has k_max entries.
        std::vector<llama_token> c = table.tokens[t];
        std::vector<double> p = table.conf[t];
        c.resize(k_max, -1);
        p.resize(k_max, 0.0);
        tokens.push_back(c);
        conf.push_back(p);
    }
    json out = {{"k_max", k_max}, {"tokens", tokens}, {"conf", conf}};
    if (!table.step.empty()) {
        out.update({{"step", table.step},
                    {"drafter_tokens", table.drafter_tokens},
                    {"context", {{"keep", table.context_keep}, {"append", table.context_append}}}});
    }
    return out;
}

// The producer stream: the drafter's greedy decode from its prompt alone, with the stop
// rules of ProducerMapper (shared with decode's as2d producer). Same vocabulary: step[i] = i.
json producer_json(DraftOracle & oracle, const Model & target, const Model & drafter, bool cross, int cap) {
    ProducerMapper pm(target, drafter, cross, cap);
    std::vector<llama_token> d;
    std::vector<double> dp;
    int fed = 0;
    bool done = false;
    for (int k = std::min(cap, pm.max_steps()); !done; k = std::min(2 * k, pm.max_steps())) {
        oracle.continuation({}, 0, k, d, dp);
        for (; fed < (int) d.size() && !done; fed++) done = pm.push(d[fed], dp[fed], fed);
        if (!done && (int) d.size() < k) throw JobError("internal: producer continuation ended early");
    }
    return json{{"tokens", pm.tokens()}, {"conf", pm.conf()}, {"step", pm.step()},
                {"steps", fed}, {"stop", pm.eos() ? "eos" : "cap"}};
}

// SpecASR's recycling queries (specbench/core/methods/specasr.py decode_specasr run on y with
// this trace's draft table), answered by the drafter: one record per query, as
// specbench.schemas.traces reads them.
struct SpecAsrCfg {
    int k_max;
    double tau;
    std::string label() const {
        char tau_g[64];
        std::snprintf(tau_g, sizeof tau_g, "%g", tau);  // Python's f"{tau:g}"
        return "specasr[k_max=" + std::to_string(k_max) + ",tau=" + tau_g + "]";
    }
};

int usable(const std::vector<llama_token> & tokens, const std::vector<double> & conf, int limit, double min_conf) {
    int n = 0;
    while (n < (int) tokens.size() && n < limit && tokens[n] >= 0 && conf[n] >= min_conf) n++;
    return n;
}

json recycle_json(DraftOracle & oracle, const std::vector<llama_token> & y, const DraftTable & table, int cap,
                  const SpecAsrCfg & cfg) {
    json queries = json::array();
    const int N = (int) y.size();
    std::vector<llama_token> tail;
    for (int t = 1; t < N;) {
        const int limit = std::min(cfg.k_max, cap - t - 1);
        std::vector<llama_token> cands;
        if (limit > 0 && !tail.empty()) {
            std::vector<llama_token> ctx(y.begin(), y.begin() + t);
            ctx.insert(ctx.end(), tail.begin(), tail.end());
            const int L = (int) tail.size();
            const std::vector<Top1> top = oracle.predictions(ctx, t, t + L);
            int kept = 0;
            while (kept < L && kept < limit && top[kept].token == tail[kept] && top[kept].prob >= cfg.tau) kept++;
            ctx.resize(t + kept);
            std::vector<llama_token> cont;
            std::vector<double> cont_conf;
            // Enough for the reference's usable_drafts(cont, cont_conf, limit - kept, tau).
            oracle.continuation(ctx, t + kept, limit - kept, cont, cont_conf, cfg.tau);
            const int n_new = usable(cont, cont_conf, limit - kept, cfg.tau);
            json top1 = json::array(), conf = json::array();
            for (const Top1 & p : top) {
                top1.push_back(p.token);
                conf.push_back(p.prob);
            }
            queries.push_back({{"t", t}, {"tail", tail}, {"top1", top1}, {"conf", conf}, {"kept", kept},
                               {"cont", cont}, {"cont_conf", cont_conf}});
            cands.assign(tail.begin(), tail.begin() + kept);
            cands.insert(cands.end(), cont.begin(), cont.begin() + n_new);
        } else if (limit > 0) {
            const int k = usable(table.tokens[t], table.conf[t], limit, cfg.tau);
            cands.assign(table.tokens[t].begin(), table.tokens[t].begin() + k);
        }
        int a = 0;
        while (a < (int) cands.size() && t + a < N && cands[a] == y[t + a]) a++;
        const int committed = std::min(a + 1, N - t);
        t += committed;
        tail.clear();
        if (a < (int) cands.size()) tail.assign(cands.begin() + a + 1, cands.end());
    }
    return queries;
}

}  // namespace

void run_trace(JobObject & job) {
    const JobModels models = parse_job_models(job, DrafterNeed::required);
    const DrafterChoice & choice = models.drafter;
    const int k_max = job.get<int>("k_max", 16);
    const bool with_producer = job.get<bool>("producer", true);
    const bool with_margins = job.get<bool>("margins", false);
    std::vector<SpecAsrCfg> specasr;
    if (job.has("specasr")) {
        for (JobObject & so : job.objects("specasr")) {
            SpecAsrCfg cfg{so.get<int>("k_max", 8), so.get<double>("tau", 0.5)};
            so.done();
            if (cfg.k_max < 1 || cfg.k_max > k_max) {
                throw JobError(so.path() + ".k_max must be in 1..k_max (" + std::to_string(k_max) + ")",
                               "the fresh drafts come from the trace's draft table; raise the job's k_max");
            }
            specasr.push_back(cfg);
        }
    }
    std::vector<Window> windows = parse_windows(job, false);
    job.done();
    if (k_max < 1) throw JobError("job key 'k_max' must be >= 1");

    if (choice.lookup) {
        if (!specasr.empty()) {
            throw JobError(std::string("specasr recycling needs a drafter model; the lookup drafter ") + LOOKUP_NAME +
                               " has none", "leave \"specasr\" out");
        }
        for (const Window & w : windows) {
            refuse_audio_for_lookup(w);
            if (with_producer && w.input.empty()) {
                throw JobError("window '" + w.id + "': the lookup drafter's producer stream is the window's input, "
                               "and the window has no \"input\"",
                               "give each window \"input\" (the input view's token ids), or pass \"producer\": false");
            }
        }
    }
    ModelLoad load;
    load.target_extra = 8;
    load.drafter_extra = 2 * k_max + 8;
    load.drafter_outputs = 64;
    load.cross_extra = std::max(96, 4 * k_max + 16) + 64;
    if (!specasr.empty()) {  // recycling compares drafter top-1s with target-vocabulary tail tokens
        load.same_vocab_for = "specasr recycling";
        load.same_vocab_hint = "leave \"specasr\" out for this pair";
    }
    emit_event("start", {{"mode", "trace"}, {"windows", windows.size()}, {"k_max", k_max}});
    LoadedModels loaded = load_models(models, windows, load, !choice.lookup);
    Model & target = *loaded.target;
    const bool cross = loaded.cross;

    for (const Window & w : windows) {
        GreedyRun g = greedy_target(target, w, with_margins);
        // Keys as specbench.schemas.traces.window_trace_from_dict reads them (less window_sha256,
        // which the Python side computes from the window itself).
        json rec = {{"kind", "trace"},           {"window_id", w.id},
                    {"y", g.y},                  {"stop_reason", g.stop_reason},
                    {"n_prompt", w.prompt.size()}, {"n_prompt_drafter", w.drafter_prompt.size()}};
        int forwards = 0;
        if (choice.lookup) {
            rec["drafts"] = drafts_json(lookup_table(w, g.y, k_max), k_max);
            rec["drafts"]["lookup"] = {{"name", LOOKUP_NAME}, {"max_ngram", LOOKUP_MAX_NGRAM}};
            if (with_producer) rec["producer"] = input_producer_json(w);
        } else {
            Model & drafter = *loaded.drafter;
            DraftOracle oracle(drafter, w);
            // The producer first: its long chain is then reused by P[t] while y follows it.
            json producer = with_producer ? producer_json(oracle, target, drafter, cross, w.cap) : json(nullptr);
            DraftTable table = draft_table(oracle, target, drafter, g.y, k_max, cross);
            rec["drafts"] = drafts_json(table, k_max);
            if (with_producer) rec["producer"] = producer;
            if (!specasr.empty()) {
                json recycle = json::object();
                for (const SpecAsrCfg & cfg : specasr) recycle[cfg.label()] = recycle_json(oracle, g.y, table, w.cap, cfg);
                rec["recycle"] = recycle;
            }
            forwards = oracle.forwards();
        }
        if (with_margins) rec["y_margin"] = g.margin;
        rec["text"] = target.detokenize(g.y, false);
        emit_event("trace_stats", {{"window_id", w.id}, {"drafter_forwards", forwards}});
        emit_result(rec);
    }
}
