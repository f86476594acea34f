// "sweep": the device cost profile. Times forwards of each width at each KV depth:
// CT(w, depth) for the target with logits for ALL rows (as a verification needs; llama-bench
// pp computes only the last row), CD(n, depth) for the drafter.
#include "modes.h"
#include "lookup.h"
#include "timing.h"

#include <algorithm>
#include <random>

namespace {

struct SweepPlan {
    std::vector<int> widths;          // target widths
    std::vector<int> drafter_widths;  // drafter forward sizes n
    bool drafter_all_logits = false;  // an SD ingest needs only the last row
    std::vector<int> depths;
    int warmup = 1;
    RepetitionRule rule;  // samples per cell: a fixed count or to a precision
    int seed = 42;
    bool encoder = true;  // time a Whisper model's encoder (a refresh of the cost tables leaves it out)
};

void check_sizes(const std::vector<int> & v, const char * key, int lo) {
    if (v.empty()) throw JobError(std::string("job key '") + key + "' must not be empty");
    for (int x : v) {
        if (x < lo) throw JobError(std::string("job key '") + key + "': " + std::to_string(x) + " < " + std::to_string(lo));
    }
}

// A timing's keys in a sweep record: how many samples and the precision they reached, their
// summary and every sample, in the order taken.
template <class T> json stats(const RepetitionRule & rule, const std::vector<T> & samples) {
    const SampleSummary<T> s = summarize(samples);
    json out = rule_fields(rule, samples);
    out.update(json{{"median_us", s.median}, {"mean_us", s.mean}, {"stdev_us", s.stdev},
                    {"min_us", s.min},       {"max_us", s.max},   {"samples_us", samples}});
    return out;
}

// All widths of one model at one depth. The depth prefix is prefilled once, untimed; every
// forward is rolled back, so each one sees exactly `depth` KV entries. Every width is warmed
// up first (no cell is the first forward after the prefill), then the timed forwards go round
// the widths not yet done (`repeat_cells`), one of each per round and every other round in
// reverse, so that each cell's samples are spread through the depth's sweep and drift reaches
// every width alike.
void sweep_depth(Model & m, const SweepPlan & plan, const std::vector<int> & widths, bool all_logits, int depth,
                 std::mt19937 & rng) {
    m.clear();
    if (depth > 0) m.forward(random_tokens(rng, m.n_vocab(), depth), false);
    std::vector<std::vector<llama_token>> tokens;
    for (int w : widths) tokens.push_back(random_tokens(rng, m.n_vocab(), w));
    for (int i = 0; i < plan.warmup; i++) {
        for (const auto & t : tokens) {
            m.forward(t, all_logits);
            m.rollback(depth);
        }
    }
    const auto samples = repeat_cells<int64_t>(widths.size(), plan.rule, [&](size_t i) {
        const int64_t us = m.forward(tokens[i], all_logits);
        m.rollback(depth);
        return us;
    });
    for (size_t i = 0; i < widths.size(); i++) {
        json rec = {{"kind", "forward"}, {"model", m.role()},       {"width", widths[i]},
                    {"depth", depth},    {"logits", all_logits ? "all" : "last"},
                    {"warmup", plan.warmup}, {"interleaved", true}};
        rec.update(stats(plan.rule, samples[i]));
        emit_result(rec);
    }
}

// The lookup drafter's cost (docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table), as a drafter table
// of width 1: prompt_lookup over `depth` random tokens of the target's vocabulary. With a large vocabulary they almost
// never recur, so a sample is the full scan of every n-gram size, the longest a lookup over
// that context takes.
void sweep_lookup(const SweepPlan & plan, int n_vocab) {
    std::mt19937 rng(plan.seed);
    for (int depth : plan.depths) {
        emit_event("progress", {{"model", "drafter"}, {"depth", depth}});
        const std::vector<llama_token> ctx = random_tokens(rng, n_vocab, depth);
        for (int i = 0; i < plan.warmup; i++) lookup_sample_us(ctx);
        const auto samples = repeat_cells<double>(1, plan.rule, [&](size_t) { return lookup_sample_us(ctx); });
        json rec = {{"kind", "forward"}, {"model", "drafter"}, {"width", 1}, {"depth", depth}, {"logits", "none"},
                    {"lookup", LOOKUP_NAME}, {"warmup", plan.warmup}};
        rec.update(stats(plan.rule, samples[0]));
        emit_result(rec);
    }
}

// A model that hears audio itself (whisper.cpp): the encoder's cost per window, the window's audio prefill.
// whisper.cpp pads every window to 30 s, so one 30 s window of silence costs what any window's encoder
// forward costs (its log-mel spectrogram over 30 s included: a shorter window's takes less). The decoder's
// forwards after it cross-attend to this encoder output.
void sweep_encoder(Model & m, const SweepPlan & plan) {
    const std::vector<float> silence(30 * 16000, 0.0f);
    emit_event("progress", {{"model", m.role()}, {"encoder", true}});
    for (int i = 0; i < plan.warmup; i++) m.encode_audio(silence);
    const auto samples = repeat_cells<int64_t>(1, plan.rule, [&](size_t) { return m.encode_audio(silence); });
    json rec = {{"kind", "encoder"}, {"model", m.role()}, {"audio_s", 30}, {"warmup", plan.warmup}};
    rec.update(stats(plan.rule, samples[0]));
    emit_result(rec);
}

void sweep_model(Model & m, const SweepPlan & plan, const std::vector<int> & widths, bool all_logits) {
    const int deepest = *std::max_element(plan.depths.begin(), plan.depths.end());
    const int widest = *std::max_element(widths.begin(), widths.end());
    // Whisper's decoder has its own 448 text positions whatever n_ctx says: refused before the encoder's record
    // (a llama.cpp context is sized from the job, and its forwards say what does not fit).
    if (m.hears_audio() && deepest + widest > m.n_ctx()) {
        throw JobError("the " + m.role() + "'s context holds " + std::to_string(m.n_ctx()) + " positions; depth " +
                           std::to_string(deepest) + " + width " + std::to_string(widest) + " do not fit (" + m.path() + ")",
                       "lower the job's depths or widths (or raise n_ctx)");
    }
    std::mt19937 rng(plan.seed);
    if (m.hears_audio() && plan.encoder) sweep_encoder(m, plan);
    for (int depth : plan.depths) {
        emit_event("progress", {{"model", m.role()}, {"depth", depth}});
        sweep_depth(m, plan, widths, all_logits, depth, rng);
    }
}

}  // namespace

void run_sweep(JobObject & job) {
    const JobModels models = parse_job_models(job, DrafterNeed::optional);
    const DrafterChoice & choice = models.drafter;
    SweepPlan plan;
    plan.widths = job.get<std::vector<int>>("widths", {1, 2, 3, 4, 5, 6, 7, 8});
    plan.drafter_widths = job.get<std::vector<int>>("drafter_widths", plan.widths);
    std::string dl = job.get<std::string>("drafter_logits", "last");
    plan.depths = job.get<std::vector<int>>("depths", {0});
    plan.warmup = job.get<int>("warmup", 1);
    plan.rule = parse_repetition_rule(job);
    plan.seed = job.get<int>("seed", 42);
    plan.encoder = job.get<bool>("encoder", true);
    job.done();

    // A drafter-only sweep ("widths": []) leaves the target untimed (a profile's later jobs).
    if (!(choice.present && plan.widths.empty())) check_sizes(plan.widths, "widths", 1);
    check_sizes(plan.drafter_widths, "drafter_widths", 1);
    check_sizes(plan.depths, "depths", 0);
    if (dl != "last" && dl != "all") throw JobError("job key 'drafter_logits': expected \"last\" or \"all\", got \"" + dl + "\"");
    plan.drafter_all_logits = dl == "all";
    if (choice.lookup && (plan.drafter_widths != std::vector<int>{1} || plan.drafter_all_logits)) {
        throw JobError(std::string("the lookup drafter ") + LOOKUP_NAME + " is timed at width 1 with no logits",
                       "pass \"drafter_widths\": [1] and \"drafter_logits\": \"last\"");
    }
    if (plan.warmup < 0) throw JobError("job key 'warmup' must be >= 0");

    int max_w = *std::max_element(plan.drafter_widths.begin(), plan.drafter_widths.end());
    for (int w : plan.widths) max_w = std::max(max_w, w);
    const int max_depth = *std::max_element(plan.depths.begin(), plan.depths.end());
    const int n_ctx = models.common.n_ctx > 0 ? models.common.n_ctx : (max_depth + max_w + 255) / 256 * 256;
    const int n_batch = std::max(512, max_w);

    emit_event("start", {{"mode", "sweep"}});
    int n_vocab = 0;
    if (!plan.widths.empty() || choice.lookup) {  // a lookup draws its contexts from the target's vocabulary
        auto target = load_model(models.target, n_ctx, n_batch, max_w);
        if (!plan.widths.empty()) sweep_model(*target, plan, plan.widths, true);
        n_vocab = target->n_vocab();
    }
    if (choice.lookup) {
        sweep_lookup(plan, n_vocab);
    } else if (choice.present) {
        auto drafter = load_model(choice.spec, n_ctx, n_batch, max_w);
        sweep_model(*drafter, plan, plan.drafter_widths, plan.drafter_all_logits);
    }
}
