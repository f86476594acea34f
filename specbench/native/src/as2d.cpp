// AS2D (docs/METHODS.md §2.5 AS2D) run for real: the producer (drafter lane) decodes greedily from its
// own prompt on its own thread and publishes immutable batches to an append-only buffer;
// the target (verifier lane, the calling thread) never waits: at each forward boundary it
// snapshots the published count and plans its candidates exactly as
// specbench/core/methods/as2d.py As2dVerifier does, verifies them in one all-rows forward,
// commits and rolls its KV back. The producer never reads the target's tokens and stops
// at its own end, its cap, or when the target finishes (drain).
#include "modes.h"
#include "vocabmap.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

As2dParams parse_as2d(JobObject & mo) {
    As2dParams p;
    p.budget = mo.get<int>("budget", 7);
    p.batch = mo.get<int>("batch", 8);
    p.conf_stop = mo.get<double>("conf_stop", 0.0);
    p.align = mo.get<std::string>("align", "anchor");
    p.horizon = mo.get<int>("horizon", 8);
    if (p.budget < 1 || p.batch < 1 || p.horizon < 1) {
        throw JobError(mo.path() + ": budget, batch and horizon must be >= 1");
    }
    if (p.align != "anchor" && p.align != "positional") {
        throw JobError(mo.path() + ".align: unknown alignment policy '" + p.align + "'", "available: anchor, positional");
    }
    return p;
}

namespace {

// specbench/core/methods/as2d.py As2dVerifier, line for line (start -1 = None).
class Verifier {
  public:
    struct Plan {
        int start = -1;
        std::vector<llama_token> candidates;
        bool anchored = false;
        bool searched = false;
    };

    Verifier(const As2dParams & p, int cap) : p_(p), cap_(cap) {}

    Plan plan(int t, llama_token root, const llama_token * z, const double * pz, int published) const {
        Plan pl;
        const int e = expected_;
        align(root, z, published, e, pl);
        const int room = std::min(p_.budget, cap_ - t - 1);
        if (pl.start < 0 || pl.start >= published || room <= 0) return pl;
        for (int i = pl.start; i < published && (int) pl.candidates.size() < room; i++) {
            if (pz[i] < p_.conf_stop) break;
            pl.candidates.push_back(z[i]);
        }
        return pl;
    }

    void observe(const Plan & pl, int accepted, int committed) {
        if (pl.start < 0) {
            expected_ += committed;
            return;
        }
        expected_ = pl.start + committed - 1;
        if (pl.anchored) floor_ = std::max(floor_, pl.start);
        if (accepted) floor_ = std::max(floor_, pl.start + accepted);
    }

  private:
    void align(llama_token root, const llama_token * z, int published, int e, Plan & pl) const {
        if (p_.align == "positional") {
            pl.start = e < published ? e + 1 : -1;
            return;
        }
        if (floor_ <= e && e < published && z[e] == root) {
            pl.start = e + 1;
            pl.anchored = true;
            return;
        }
        std::vector<int> order;
        for (int k = e + 1; k < e + p_.horizon; k++) order.push_back(k);
        order.push_back(e - 1);
        for (int k : order) {
            if (k < floor_ || k >= published) continue;
            pl.searched = true;
            if (z[k] == root) {
                pl.start = k + 1;
                pl.anchored = true;
                return;
            }
        }
        pl.start = e < published ? e + 1 : -1;
    }

    const As2dParams & p_;
    const int cap_;
    int expected_ = 0;  // stream index expected to hold the last committed token
    int floor_ = 0;     // stream indices below this are exhausted
};

// The append-only buffer. The producer writes z[i] before it releases a count covering i;
// the target reads z[0..count) after an acquire load. Sized once: nothing moves.
struct Stream {
    explicit Stream(int cap) : z(cap), pz(cap), step(cap) {}
    std::vector<llama_token> z;
    std::vector<double> pz;
    std::vector<int> step;
    std::atomic<int> published{0};
    std::atomic<bool> stop{false};
    // Producer-private until joined.
    int produced = 0;
    int steps = 0;
    std::string stop_reason;
    std::vector<int64_t> publish_us;
    std::vector<int> publish_count;
    std::vector<int> publish_step;       // the producer step that published each batch
    std::vector<int64_t> step_start_us;  // start of each drafter forward (steps 1..), since the clock start
    std::vector<int64_t> step_us;        // its end: the producer lane is busy in between
    int64_t started_us = -1;             // the producer thread's first instruction, since the clock start
    int64_t publish_cost_us = 0;         // producer time spent publishing (all batches)
    std::exception_ptr error;
};

void produce(Model & drafter, ProducerMapper & mapper, Stream & s, const As2dParams & p, int64_t t0, bool with_conf) {
    auto next_top = [&]() { return with_conf ? drafter.top1(-1) : Top1{drafter.argmax(-1), 1.0, 0.0f}; };
    s.started_us = now_us() - t0;
    auto publish = [&](int n, int step) {
        const int64_t begin = now_us();
        s.published.store(n, std::memory_order_release);
        s.publish_us.push_back(begin - t0);
        s.publish_count.push_back(n);
        s.publish_step.push_back(step);
        s.publish_cost_us += now_us() - begin;
    };
    Top1 next = next_top();  // step 0: the prefill's prediction
    for (int step = 0;; step++) {
        const bool done = mapper.push(next.token, next.prob, step);
        s.steps = step + 1;
        const int total = (int) mapper.tokens().size();
        for (int i = s.produced; i < total; i++) {
            s.z[i] = mapper.tokens()[i];
            s.pz[i] = mapper.conf()[i];
            s.step[i] = mapper.step()[i];
            s.produced = i + 1;
            if (s.produced % p.batch == 0) publish(s.produced, step);
        }
        if (done) {
            if (s.produced % p.batch != 0) publish(s.produced, step);  // the final partial batch
            s.stop_reason = mapper.eos() ? "eos" : "cap";
            return;
        }
        if (s.stop.load(std::memory_order_relaxed)) {
            s.stop_reason = "drained";
            return;
        }
        const int64_t us = drafter.forward(&next.token, 1, false);
        s.step_start_us.push_back(drafter.last_forward_start_us() - t0);
        s.step_us.push_back(s.step_start_us.back() + us);
        next = next_top();
    }
}

// The verifier lane (the calling thread): plans from the published count at each forward
// boundary, verifies, commits, until an end of generation or the cap.
void verify_lane(Model & target, const Window & w, const As2dParams & p, const Stream & s, int64_t start,
                 std::vector<llama_token> & y, DecodeRun & r) {
    Verifier v(p, w.cap);
    while (!target.is_eog(y.back()) && (int) y.size() < w.cap) {
        const int t = (int) y.size();
        const int published = s.published.load(std::memory_order_acquire);
        const int64_t plan_start = now_us();
        Verifier::Plan pl = v.plan(t, y.back(), s.z.data(), s.pz.data(), published);
        const int64_t plan_us = now_us() - plan_start;
        json extra = {{"published", published},
                      {"plan_us", plan_us},
                      {"start", pl.start < 0 ? json(nullptr) : json(pl.start)},
                      {"candidates", pl.candidates},
                      {"anchored", pl.anchored},
                      {"searched", pl.searched}};
        const int a = verify_round(target, y, pl.candidates, w, r.ops, std::move(extra));
        v.observe(pl, a, (int) y.size() - t);
    }
    stamp_ops(r.ops, start);  // each forward's start: the target lane is busy from there for its `us`
}

json producer_record(const Stream & s, bool with_conf) {
    const int n = s.produced;
    json out = {{"tokens", std::vector<llama_token>(s.z.begin(), s.z.begin() + n)},
                {"step", std::vector<int>(s.step.begin(), s.step.begin() + n)}};
    if (with_conf) out["conf"] = std::vector<double>(s.pz.begin(), s.pz.begin() + n);
    out.update({{"steps", s.steps},
                {"stop", s.stop_reason},
                {"published", s.published.load()},
                {"publish_us", s.publish_us},
                {"publish_count", s.publish_count},
                {"publish_step", s.publish_step},
                {"started_us", s.started_us},
                {"publish_cost_us", s.publish_cost_us},
                {"step_start_us", s.step_start_us},
                {"step_us", s.step_us}});
    return out;
}

}  // namespace

DecodeRun run_as2d(Model & target, Model & drafter, const Window & w, const As2dParams & p, bool cross) {
    DecodeRun r;
    r.prefill = prefill_window(target, &drafter, w);
    r.prefill_us = r.prefill.total_us();
    ProducerMapper mapper(target, drafter, cross, w.cap);
    if ((int) w.drafter_prompt.size() + mapper.max_steps() > drafter.n_ctx()) {
        throw JobError("drafter context too small for the as2d producer of window '" + w.id + "'", "raise the job's n_ctx");
    }
    Stream s(w.cap);
    const bool with_conf = p.conf_stop > 0.0;
    std::vector<llama_token> y;
    const int64_t start = now_us();
    y.push_back(target.argmax(-1));
    std::thread producer([&]() {
        try {
            produce(drafter, mapper, s, p, start, with_conf);
        } catch (...) {
            s.error = std::current_exception();
        }
    });
    try {
        verify_lane(target, w, p, s, start, y, r);
    } catch (...) {
        s.stop.store(true);
        producer.join();
        throw;
    }
    r.decode_us = now_us() - start;
    s.stop.store(true);
    producer.join();
    if (s.error) std::rethrow_exception(s.error);
    r.tokens = y;
    r.stop_reason = target.is_eog(y.back()) ? "eos" : "cap";
    json producer_json = producer_record(s, with_conf);
    r.extra["producer"] = producer_json;
    r.extra["cross_vocab"] = cross;
    return r;
}

// AS2D with the lookup drafter as its producer (docs/METHODS.md §2.7 Prompt-lookup drafting): no model and no
// thread. The stream is the window's input view in the target's tokens (its `input`, at most cap tokens),
// all of it published before the clock starts, as the audio is there before an ASR producer
// reads it; the verifier plans and aligns on it as on any producer's stream.
DecodeRun run_as2d_input(Model & target, const Window & w, const As2dParams & p) {
    DecodeRun r;
    r.prefill = prefill_window(target, nullptr, w);
    r.prefill.first_draft_us = r.prefill.first_token_us;
    r.prefill_us = r.prefill.total_us();
    Stream s(w.cap);
    const int n = std::min((int) w.input.size(), w.cap);
    for (int i = 0; i < n; i++) {
        s.z[i] = w.input[i];
        s.pz[i] = 1.0;
        s.step[i] = 0;
    }
    s.produced = n;
    s.steps = 1;  // step 0 only, which no forward computes
    s.stop_reason = "eos";
    s.published.store(n, std::memory_order_release);
    std::vector<llama_token> y;
    const int64_t start = now_us();
    y.push_back(target.argmax(-1));
    verify_lane(target, w, p, s, start, y, r);
    r.decode_us = now_us() - start;
    r.tokens = y;
    r.stop_reason = target.is_eog(y.back()) ? "eos" : "cap";
    r.extra["producer"] = producer_record(s, p.conf_stop > 0.0);
    r.extra["cross_vocab"] = false;
    return r;
}
