// "decode": really run a method on each window and time it. Target-only greedy, or
// serial speculative decoding (docs/METHODS.md §2.3 Serial speculative decoding): the drafter ingests the committed
// tokens it lacks, drafts k = W-1 tokens one forward each, the target verifies [root, c0..] in one
// forward with logits for every row, and both KV caches roll back to the committed prefix.
#include "modes.h"
#include "audio.h"
#include "energy.h"
#include "lookup.h"
#include "probe.h"
#include "vocabmap.h"

#include <algorithm>
#include <chrono>
#include <thread>

const std::vector<std::string> & decode_methods() {
    static const std::vector<std::string> names = {"as2d", "sd", "specasr", "target"};
    return names;
}

namespace {

struct Method {
    std::string name;    // "target" | "sd" | "specasr" | "as2d"
    int width = 1;       // physical verification width: sd W; specasr k_max + 1; as2d budget + 1
    double p_min = 0.0;  // sd: stop drafting below this top-1 probability
    int k_max = 0;       // specasr: longest draft
    double tau = 0.0;    // specasr: confidence threshold (drafting and keeping recycled tokens)
    As2dParams as2d;     // as2d
    json to_json() const {
        if (name == "target") return json{{"name", name}};
        if (name == "specasr") return json{{"name", name}, {"k_max", k_max}, {"tau", tau}};
        if (name == "as2d") {
            return json{{"name", name},           {"budget", as2d.budget}, {"batch", as2d.batch},
                        {"conf_stop", as2d.conf_stop}, {"align", as2d.align}, {"horizon", as2d.horizon}};
        }
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
    } else if (m.name == "specasr") {
        m.k_max = mo.get<int>("k_max", 8);
        m.tau = mo.get<double>("tau", 0.5);
        if (m.k_max < 1) throw JobError(mo.path() + ".k_max must be >= 1");
        m.width = m.k_max + 1;
    } else if (m.name == "as2d") {
        m.as2d = parse_as2d(mo);
        m.width = m.as2d.budget + 1;
    } else if (m.name != "target") {
        throw JobError("unknown method '" + m.name + "'", "available: " + join_names(decode_methods()));
    }
    mo.done();
    return m;
}

// The serial decode clock (docs/METHODS.md §1.3 Two clocks) around a method's rounds: both prefills (a
// lookup drafter, `drafter` null, has none), y[0] from the target's, then `round(ops)` until
// an end of generation or the cap.
template <class Round>
DecodeRun run_serial(Model & target, Model * drafter, const Window & w, std::vector<llama_token> & y, Round round) {
    DecodeRun r;
    r.prefill = prefill_window(target, drafter, w);
    // A lookup drafter can draft as soon as the target's prefill is done.
    if (!drafter) r.prefill.first_draft_us = r.prefill.first_token_us;
    r.prefill_us = r.prefill.total_us();
    const int64_t start = now_us();
    y.push_back(target.argmax(-1));
    while (!target.is_eog(y.back()) && (int) y.size() < w.cap) round(r.ops);
    r.decode_us = now_us() - start;
    stamp_ops(r.ops, start);
    r.stop_reason = target.is_eog(y.back()) ? "eos" : "cap";
    r.tokens = y;
    return r;
}

// The drafter's next greedy draft after its last forward. The softmax is needed only for the
// confidence stop (p_min > 0); the timed loop skips it otherwise.
Top1 next_draft(const Model & drafter, double p_min) {
    return p_min > 0.0 ? drafter.top1(-1) : Top1{drafter.argmax(-1), 1.0, 0.0f};
}

// What a serial decoder with a drafter model holds for one window: both models, the window,
// the method and the committed tokens y.
class DrafterDecoder {
  public:
    DrafterDecoder(Model & target, Model & drafter, const Window & w, const Method & m)
        : target_(target), drafter_(drafter), w_(w), m_(m) {}

  protected:
    // The serial decode clock around `round`, called once per round.
    template <class Round> DecodeRun run_rounds(Round round) { return run_serial(target_, &drafter_, w_, y_, round); }

    Model & target_;
    Model & drafter_;
    const Window & w_;
    const Method & m_;
    std::vector<llama_token> y_;
};

// State of one serial SD window. Positions: the target's KV holds prompt + y[:t-1] (the
// root y[t-1] is fed by the next verification); the drafter's holds its prompt + y[:have].
class SpecDecoder : DrafterDecoder {
  public:
    using DrafterDecoder::DrafterDecoder;

    DecodeRun run() {
        return run_rounds([this](std::vector<Op> & ops) { round(ops); });
    }

  private:
    // Drafter: ingest the committed tokens it lacks (one forward), then draft greedily up to
    // k_max = min(W-1, cap-t-1) (a longer draft could not be committed; the reference's limit).
    std::vector<llama_token> draft(int k_max, std::vector<Op> & ops) {
        const int t = (int) y_.size();
        int depth = drafter_.kv_len();
        std::vector<llama_token> lacking(y_.begin() + have_, y_.end());
        const int64_t ingest_us = drafter_.forward(lacking, false);
        ops.push_back(forward_op("drafter", drafter_, (int) lacking.size(), depth, -1, ingest_us));
        have_ = t;
        std::vector<llama_token> c;
        fed_ = 0;
        Top1 next = next_draft(drafter_, m_.p_min);
        while ((int) c.size() < k_max && next.prob >= m_.p_min) {
            c.push_back(next.token);
            // Nothing follows an EOG, and the last draft needs no forward of its own.
            if (drafter_.is_eog(next.token) || (int) c.size() == k_max) break;
            depth = drafter_.kv_len();
            const int64_t us = drafter_.forward(&next.token, 1, false);
            ops.push_back(forward_op("drafter", drafter_, 1, depth, -1, us));
            fed_++;
            next = next_draft(drafter_, m_.p_min);
        }
        return c;
    }

    void round(std::vector<Op> & ops) {
        const int t = (int) y_.size();
        const int k_max = std::min(m_.width - 1, w_.cap - t - 1);
        std::vector<llama_token> c;
        if (k_max > 0) c = draft(k_max, ops);  // no room: a plain target step, the drafter idles

        const int a = verify_round(target_, y_, c, w_, ops);
        // The drafter keeps what matches y (the target rolled back to prompt + y[:-1]).
        if (k_max > 0) have_ = t + std::min(a, fed_);
        drafter_.rollback((int) w_.drafter_prompt.size() + have_);
    }

    int have_ = 0;  // committed tokens already in the drafter's KV
    int fed_ = 0;   // drafts of this round fed to the drafter
};

// SpecASR-style serial decoding (docs/METHODS.md §2.4 SpecASR-style), exactly specbench/core/methods/specasr.py:
// adaptive length (draft while the top-1 probability >= tau, at most k_max and cap - t - 1),
// and recycling: after a rejection at draft position a the tail c[a+1:] is kept; next round
// the drafter ingests [committed it lacks] + [correction] + tail in one forward with logits
// for the tail's rows, keeps the leading tail tokens whose top-1 agrees with confidence >=
// tau, and continues drafting after them (the ingest's prediction there is the first new
// draft). The drafter's KV bookkeeping (`valid_`) is the reference's; the single-token
// forward whose only outcome was a confidence below tau is logged with "probe": true (the
// reference counts it too: it is what tells the drafter to stop).
class SpecAsrDecoder : DrafterDecoder {
  public:
    SpecAsrDecoder(Model & target, Model & drafter, const Window & w, const Method & m)
        : DrafterDecoder(target, drafter, w, m), npd_((int) w.drafter_prompt.size()) {}

    DecodeRun run() {
        return run_rounds([this](std::vector<Op> & ops) { round(ops); });
    }

  private:
    void round(std::vector<Op> & ops) {
        const int t = (int) y_.size();
        const int limit = std::min(m_.k_max, w_.cap - t - 1);
        std::vector<llama_token> c;
        int in_kv = 0;  // candidates the reference counts in the drafter's KV after drafting
        if (limit > 0 && !tail_.empty()) {
            drafter_.rollback(npd_ + valid_);
            std::vector<llama_token> ingest(y_.begin() + valid_, y_.end());
            ingest.insert(ingest.end(), tail_.begin(), tail_.end());
            const int L = (int) tail_.size();
            const int depth = drafter_.kv_len();
            const int64_t us = drafter_.forward_last(ingest, L + 1);
            ops.push_back(forward_op("drafter", drafter_, (int) ingest.size(), depth, -1, us));
            const int base = (int) ingest.size() - L - 1;
            std::vector<Top1> top;
            for (int i = 0; i <= L; i++) top.push_back(drafter_.top1(base + i));
            int kept = 0;
            while (kept < L && kept < limit && top[kept].token == tail_[kept] && top[kept].prob >= m_.tau) kept++;
            c.assign(tail_.begin(), tail_.begin() + kept);
            drafter_.rollback(npd_ + t + kept);
            in_kv = kept + draft_more(top[kept], limit - kept, c, ops);
        } else if (limit > 0) {
            drafter_.rollback(npd_ + valid_);
            std::vector<llama_token> lacking(y_.begin() + valid_, y_.end());
            const int depth = drafter_.kv_len();
            const int64_t us = drafter_.forward(lacking, false);
            ops.push_back(forward_op("drafter", drafter_, (int) lacking.size(), depth, -1, us));
            in_kv = draft_more(drafter_.top1(-1), limit, c, ops);
        }
        const int a = verify_round(target_, y_, c, w_, ops);
        if (limit > 0) valid_ = t + std::min(a, in_kv);
        tail_.clear();
        if (a < (int) c.size()) tail_.assign(c.begin() + a + 1, c.end());
    }

    // Greedy drafts from `next` while its confidence >= tau, at most `room`; one forward per
    // draft except the last (after an end-of-generation draft or at `room`). Returns the
    // drafts fed to the drafter (its KV holds them).
    int draft_more(Top1 next, int room, std::vector<llama_token> & c, std::vector<Op> & ops) {
        int n = 0, fed = 0;
        while (n < room && next.prob >= m_.tau) {
            c.push_back(next.token);
            n++;
            if (drafter_.is_eog(next.token) || n == room) break;
            const int depth = drafter_.kv_len();
            const int64_t us = drafter_.forward(&next.token, 1, false);
            fed++;
            next = drafter_.top1(-1);
            Op op = forward_op("drafter", drafter_, 1, depth, -1, us);
            if (next.prob < m_.tau) op.extra = json{{"probe", true}};
            ops.push_back(op);
        }
        return fed;
    }

    const int npd_;
    std::vector<llama_token> tail_;  // unverified drafts after the last rejection
    int valid_ = 0;                  // committed tokens (after the prompt) valid in the drafter's KV
};

// Serial SD with a drafter of another vocabulary (docs/METHODS.md §2.3 Serial speculative decoding + the text
// mapping), with the reference's limits (k <= min(W-1, cap-t-1), no drafting when that is 0). Each round
// the drafter's context is its prompt + the committed text retokenized with its tokenizer;
// its KV keeps the longest common prefix with that and ingests the rest in one forward.
// It then drafts greedily, mapping its tokens to target tokens with a fresh StreamMapper,
// until the candidates are decided: `limit` mapped tokens, a mapped token below p_min
// (conf = the lowest of the drafter tokens it covers), the drafter's end, or
// max(96, 4 (W-1) + 16) drafter tokens (then flushed). The trace's cross-vocabulary draft
// rows use the same rule, so replay sees the same candidates.
class CrossSpecDecoder : DrafterDecoder {
  public:
    using DrafterDecoder::DrafterDecoder;

    DecodeRun run() {
        kv_ = w_.drafter_prompt;  // what the prefill leaves in the drafter's KV
        DecodeRun r = run_rounds([this](std::vector<Op> & ops) {
            const int t = (int) y_.size();
            const int limit = std::min(m_.width - 1, w_.cap - t - 1);
            std::vector<llama_token> c;
            if (limit > 0) c = draft(t, limit, ops);
            verify_round(target_, y_, c, w_, ops);
        });
        r.extra["cross_vocab"] = true;
        return r;
    }

  private:
    static int usable(const StreamMapper & map, int limit, double p_min) {
        int n = 0;
        while (n < (int) map.tokens.size() && n < limit && map.conf[n] >= p_min) n++;
        return n;
    }

    std::vector<llama_token> draft(int t, int limit, std::vector<Op> & ops) {
        std::vector<llama_token> full = w_.drafter_prompt;
        const std::vector<llama_token> ctx = target_to_drafter(target_, drafter_, y_, t);
        full.insert(full.end(), ctx.begin(), ctx.end());
        size_t m = 0;
        while (m < kv_.size() && m < full.size() && kv_[m] == full[m]) m++;
        if (m == full.size()) m--;  // the last position's logits are needed again
        drafter_.rollback((int) m);
        std::vector<llama_token> ingest(full.begin() + m, full.end());
        const int depth = drafter_.kv_len();
        const int64_t ingest_us = drafter_.forward(ingest, false);
        ops.push_back(forward_op("drafter", drafter_, (int) ingest.size(), depth, -1, ingest_us));
        kv_ = full;

        StreamMapper map(target_, drafter_);
        const int max_steps = std::max(96, 4 * (m_.width - 1) + 16);
        Top1 next = next_draft(drafter_, m_.p_min);
        for (int step = 0;; step++) {
            map.push(next.token, next.prob, step);
            const int n = usable(map, limit, m_.p_min);
            if (n == limit || n < (int) map.tokens.size() || map.ended()) break;
            if (step + 1 >= max_steps) {
                map.finish(step);
                break;
            }
            const int d = drafter_.kv_len();
            const int64_t us = drafter_.forward(&next.token, 1, false);
            ops.push_back(forward_op("drafter", drafter_, 1, d, -1, us));
            kv_.push_back(next.token);
            next = next_draft(drafter_, m_.p_min);
        }
        const int k = usable(map, limit, m_.p_min);
        return std::vector<llama_token>(map.tokens.begin(), map.tokens.begin() + k);
    }

    std::vector<llama_token> kv_;  // the drafter's KV content (its prompt first)
};

// Serial SD with the prompt-lookup drafter (docs/METHODS.md §2.7 Prompt-lookup drafting), exactly
// specbench/core/methods/lookup.py LookupKV with decode_sd: each round with room (limit =
// min(W-1, cap-t-1) > 0) the candidates are prompt_lookup over prompt + y, timed as one
// drafter op of width 1 at depth n_prompt + t (the context it searched), on the target's
// thread; the target verifies them (none found: a plain single-token step).
class LookupSpecDecoder {
  public:
    LookupSpecDecoder(Model & target, const Window & w, const Method & m)
        : target_(target), w_(w), m_(m), ctx_(w.prompt) {}

    DecodeRun run() {
        return run_serial(target_, nullptr, w_, y_, [this](std::vector<Op> & ops) { round(ops); });
    }

  private:
    void round(std::vector<Op> & ops) {
        const int t = (int) y_.size();
        const int limit = std::min(m_.width - 1, w_.cap - t - 1);
        ctx_.insert(ctx_.end(), y_.begin() + (ctx_.size() - w_.prompt.size()), y_.end());
        std::vector<llama_token> c;
        if (limit > 0) {
            const int64_t start = now_us();
            c = prompt_lookup(ctx_.data(), (int) ctx_.size(), limit);
            Op op{"drafter", 1, (int) ctx_.size(), -1, now_us() - start};
            op.start_us = start;
            ops.push_back(op);
        }
        verify_round(target_, y_, c, w_, ops);
    }

    Model & target_;
    const Window & w_;
    const Method & m_;
    std::vector<llama_token> y_;
    std::vector<llama_token> ctx_;  // prompt + the committed tokens, caught up each round
};

DecodeRun target_only(Model & target, const Window & w) {
    GreedyRun g = greedy_target(target, w, false);
    DecodeRun r{g.y, g.stop_reason, g.prefill_us, g.decode_us, g.ops};
    r.prefill = g.prefill;
    return r;
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

void report(const Window & w, const Method & m, const DecodeRun & r, const std::string & text, int sample, int slot) {
    json rec = {{"kind", "decode"}, {"window_id", w.id}, {"method", m.to_json()}, {"sample", sample}, {"slot", slot}};
    if (!w.reference.empty()) {
        const int pos = first_divergence(r.tokens, w.reference);
        if (pos >= 0) {
            // Lossless contract: a diverging window reports where, never a throughput.
            rec["kind"] = "divergence";
            rec.update({{"position", pos}, {"expected", token_at(w.reference, pos)}, {"got", token_at(r.tokens, pos)}});
            // [width, accepted] of every target forward: what the divergence mode replays.
            json forwards = json::array();
            for (const Op & op : r.ops) {
                if (std::string(op.model) == "target") forwards.push_back({op.width, op.accepted});
            }
            rec["forwards"] = forwards;
            for (const char * key : {"request", "arrival_us", "start_us", "end_us"}) {
                if (r.extra.contains(key)) rec[key] = r.extra[key];
            }
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
    rec.update(prefill_json(r.prefill, w, r.decode_us, m.name != "target"));
    rec["text"] = text;
    rec.update(r.extra);
    emit_result(rec);
}

// Untimed forwards so that the first window does not pay for page faults and graph setup.
void warm(Model & m, int width) {
    std::vector<llama_token> tokens(width, 0);
    m.clear();
    m.forward(tokens, true);
    m.clear();
}

// Sustained, paced load (docs/METHODS.md §6.3 Sustained load): requests k = 0, 1, ... decode window
// k mod n, the first arriving at the stream's zero; the next arrives gaps_us[k mod n] later (as the
// audio would), or when request k ends (no gaps_us: back to back). No request starts after
// duration_s; a request that arrives while the previous one still runs waits (queueing).
struct Pace {
    bool on = false;
    int64_t duration_us = 0;
    std::vector<int> gaps_us;  // per window; empty: back to back
};

Pace parse_pace(JobObject & job, size_t n_windows) {
    Pace p;
    if (!job.has("pace")) return p;
    JobObject po = job.object("pace");
    p.on = true;
    const double duration_s = po.need<double>("duration_s");
    p.gaps_us = po.get<std::vector<int>>("gaps_us", {});
    po.done();
    if (!(duration_s > 0)) throw JobError("job key 'pace.duration_s' must be > 0 (seconds of the stream)");
    p.duration_us = (int64_t) (duration_s * 1e6);
    if (!p.gaps_us.empty() && p.gaps_us.size() != n_windows) {
        throw JobError("job key 'pace.gaps_us' must have one gap per window (" + std::to_string(n_windows) + "), got " +
                       std::to_string(p.gaps_us.size()));
    }
    for (int g : p.gaps_us) {
        if (g < 0) throw JobError("job key 'pace.gaps_us' must hold gaps >= 0 (microseconds)");
    }
    return p;
}

void sleep_until_us(int64_t t_us) {
    for (int64_t left = t_us - now_us(); left > 0; left = t_us - now_us()) {
        std::this_thread::sleep_for(std::chrono::microseconds(left));
    }
}

// The paced stream: `run(w)` decodes and reports one request, given its times on now_us()'s clock.
template <class Request>
void run_paced(const Pace & pace, const std::vector<Window> & windows, Request run) {
    const int64_t zero = now_us();
    emit_event("paced", {{"zero_us", zero}, {"duration_us", pace.duration_us}});
    int64_t arrival = zero;
    for (size_t k = 0; arrival - zero < pace.duration_us; k++) {
        const size_t i = k % windows.size();
        sleep_until_us(arrival);
        const int64_t end = run(windows[i], json{{"request", k}, {"arrival_us", arrival}});
        arrival = pace.gaps_us.empty() ? end : arrival + pace.gaps_us[i];
    }
}

}  // namespace

void run_decode(JobObject & job) {
    const JobModels models = parse_job_models(job, DrafterNeed::optional);
    const DrafterChoice & choice = models.drafter;
    std::vector<Method> methods;
    for (JobObject & mo : job.objects("methods")) methods.push_back(parse_method(mo));
    std::vector<Window> windows = parse_windows(job, true);
    const bool warmup = job.get<bool>("warmup", true);
    const int runs = job.get<int>("runs", 1);
    const int warmup_runs = job.get<int>("warmup_runs", 0);
    // alternate: odd samples run the methods in reverse order (ABBA), so a method and the
    // target-only decode beside it see the same moment of the host in either order.
    const bool alternate = job.get<bool>("alternate", false);
    // reuse_audio_prefill: a Whisper model encodes a window once and keeps the encoder output for the next
    // decodes of the same window (methods, runs), which the decode clock excludes anyway.
    const bool reuse_audio = job.get<bool>("reuse_audio_prefill", false);
    const ProbeOptions probe = parse_probe(job);
    const Pace pace = parse_pace(job, windows.size());
    const EnergyOptions energy = parse_energy(job);
    job.done();
    if (pace.on && (methods.size() != 1 || runs != 1)) {
        throw JobError("job key 'pace' takes one method and runs 1 (each method runs its own paced stream)");
    }
    if (pace.on && energy.on) {
        throw JobError("job keys 'pace' and 'energy' together: a paced stream's energy is not attributed",
                       "measure energy in an unpaced decode job");
    }
    if (runs < 1) throw JobError("job key 'runs' must be >= 1 (timed decodes of every window and method)");
    if (warmup_runs < 0) throw JobError("job key 'warmup_runs' must be >= 0 (untimed decodes before the first window)");

    int max_w = 1;
    bool needs_drafter = false;
    std::string drafting;  // the first method that needs a drafter
    for (const Method & m : methods) {
        max_w = std::max(max_w, m.width);
        if (m.name != "target" && !needs_drafter) drafting = m.name;
        needs_drafter |= m.name != "target";
    }
    if (needs_drafter && !choice.present) {
        throw JobError("method " + drafting + " needs a drafter", "add \"drafter\": {\"path\": ...} to the job");
    }

    if (choice.lookup) {
        bool as2d = false;
        for (const Method & m : methods) {
            if (m.name == "specasr") {
                throw JobError(std::string("method specasr needs a drafter model; the lookup drafter ") + LOOKUP_NAME +
                                   " drafts for sd and as2d only",
                               "give the job a \"drafter\": {\"path\": ...} for specasr");
            }
            as2d |= m.name == "as2d";
        }
        for (const Window & w : windows) {
            refuse_audio_for_lookup(w);
            if (as2d && w.input.empty()) {
                throw JobError("window '" + w.id + "': as2d with the lookup drafter " + LOOKUP_NAME +
                                   " publishes the window's input, and the window has no \"input\"",
                               "give each window \"input\": the token ids of its input view alone");
            }
        }
        needs_drafter = false;  // no model to load
    }

    ModelLoad load;
    load.target_extra = load.drafter_extra = max_w + 8;
    load.target_outputs = max_w;
    load.drafter_outputs = max_w + 1;
    load.cross_extra = max_w + 64;
    for (const Method & m : methods) {
        if (m.name == "specasr") {  // recycling compares drafter top-1s with target-vocabulary tail tokens
            load.same_vocab_for = "method specasr";
            load.same_vocab_hint = "use sd or as2d with this pair (they map tokens through text)";
        }
    }
    emit_event("start", {{"mode", "decode"}, {"windows", windows.size()}, {"methods", methods.size()}});
    LoadedModels loaded = load_models(models, windows, load, needs_drafter);
    Model * const target = loaded.target.get();
    Model * const drafter = loaded.drafter.get();
    const bool cross = loaded.cross;
    target->keep_audio_prefill(reuse_audio);
    if (drafter) drafter->keep_audio_prefill(reuse_audio);
    if (warmup) {
        warm(*target, max_w);
        if (drafter) warm(*drafter, 1);
    }
    // Every decode starts from cleared KV caches (prefill_window), so samples are independent decodes.
    auto decode = [&](const Window & w, const Method & m) -> DecodeRun {
        if (m.name == "target") return target_only(*target, w);
        if (m.name == "sd" && choice.lookup) return LookupSpecDecoder(*target, w, m).run();
        if (m.name == "sd") {
            return cross ? CrossSpecDecoder(*target, *drafter, w, m).run() : SpecDecoder(*target, *drafter, w, m).run();
        }
        if (m.name == "specasr") return SpecAsrDecoder(*target, *drafter, w, m).run();
        if (choice.lookup) return run_as2d_input(*target, w, m.as2d);
        return run_as2d(*target, *drafter, w, m.as2d, cross);
    };
    // A request's span on the decode clock (the energy sampler's and the pacing's): its prefill
    // and decode, not the report.
    auto timed_decode = [&](const Window & w, const Method & m) -> DecodeRun {
        const int64_t start_us = now_us();
        DecodeRun r = decode(w, m);
        r.extra.update({{"start_us", start_us}, {"end_us", now_us()}});
        return r;
    };
    // Warm-up decodes: each method on the first window, once per job, discarded.
    for (int i = 0; i < warmup_runs; i++) {
        for (const Method & m : methods) decode(windows[0], m);
    }
    if (warmup_runs > 0) emit_event("warmed_up", {{"warmup_runs", warmup_runs}});
    if (pace.on) {
        run_paced(pace, windows, [&](const Window & w, json times) {
            DecodeRun r = timed_decode(w, methods[0]);
            r.extra.update(times);
            report(w, methods[0], r, target->detokenize(r.tokens, false), 0, 0);
            return r.extra["end_us"].get<int64_t>();
        });
        return;
    }
    // Battery samples from here on: the idle draw with the models loaded, then every window.
    EnergySampler sampler(energy);
    sampler.idle();
    // Samples of a window interleave the methods (sample 0 of each, then sample 1, ...), so drift
    // within a window reaches every method alike. Probes: before the first window and after each.
    emit_probe(*target, drafter, choice.lookup, probe, "start");
    for (const Window & w : windows) {
        if (reuse_audio) encode_window_ahead(*target, drafter, w);
        for (int s = 0; s < runs; s++) {
            const bool reversed = alternate && s % 2 == 1;
            for (size_t i = 0; i < methods.size(); i++) {
                const int slot = (int) (reversed ? methods.size() - 1 - i : i);
                const Method & m = methods[slot];
                DecodeRun r = timed_decode(w, m);
                report(w, m, r, target->detokenize(r.tokens, false), s, slot);
            }
        }
        emit_probe(*target, drafter, choice.lookup, probe, "after", {{"window_id", w.id}});
        sampler.flush();
    }
}
