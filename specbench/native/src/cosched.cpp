// "cosched": co-scheduling slowdowns (docs/METHODS.md §4.3 Co-scheduling ratios). The drafter's AR loop (one-token
// decodes) runs on its own thread and llama_context while the target runs width-w
// forwards with logits for every row on the calling thread; each is also timed alone.
// rho_target(w) = together / alone target forward time, rho_drafter(w) = together / alone
// drafter step time (medians). Together, the target runs at least `repetitions` forwards,
// and more until at least `repetitions` drafter steps ran entirely inside its timed span.
#include "modes.h"
#include "timing.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

namespace {

// A timing's spread in a cosched record (its median is a record key of its own).
json spread(const std::vector<int64_t> & v) {
    if (v.empty()) return json{{"n", 0}};
    const SampleSummary<int64_t> s = summarize(v);
    return json{{"n", s.n}, {"min_us", s.min}, {"max_us", s.max}, {"stdev_us", s.stdev}};
}

// One drafter AR step at a fixed depth: feed a token, keep only the last logits, roll back.
int64_t drafter_step(Model & d, llama_token tok, int depth) {
    const int64_t us = d.forward(&tok, 1, false);
    d.argmax(-1);  // the loop's greedy choice is part of a step
    d.rollback(depth);
    return us;
}

}  // namespace

void run_cosched(JobObject & job) {
    const JobModels models = parse_job_models(job, DrafterNeed::model);
    const CommonOptions & common = models.common;
    const ModelSpec & target_spec = models.target;
    const ModelSpec & drafter_spec = models.drafter.spec;
    std::vector<int> widths = job.get<std::vector<int>>("widths", {1, 2, 3, 4, 5, 6, 7, 8});
    std::vector<int> depths = job.get<std::vector<int>>("depths", {0});
    const int warmup = job.get<int>("warmup", 1);
    const int reps = job.get<int>("repetitions", 5);
    const int drafter_alone_steps = job.get<int>("drafter_steps", 20);
    const int seed = job.get<int>("seed", 42);
    job.done();
    if (reps < 5) throw JobError("job key 'repetitions' must be >= 5 (median and spread need them)");
    if (warmup < 0 || drafter_alone_steps < 5) throw JobError("job keys 'warmup' >= 0 and 'drafter_steps' >= 5");
    if (widths.empty() || depths.empty()) throw JobError("job keys 'widths' and 'depths' must not be empty");
    int max_w = 1, max_d = 0;
    for (int w : widths) {
        if (w < 1) throw JobError("job key 'widths': every width must be >= 1");
        max_w = std::max(max_w, w);
    }
    for (int d : depths) {
        if (d < 0) throw JobError("job key 'depths': every depth must be >= 0");
        max_d = std::max(max_d, d);
    }
    const int n_ctx = common.n_ctx > 0 ? common.n_ctx : (max_d + max_w + 8 + 255) / 256 * 256;
    emit_event("start", {{"mode", "cosched"}, {"widths", widths}, {"depths", depths}});
    auto target = load_model(target_spec, n_ctx, std::max(512, max_w), max_w);
    auto drafter = load_model(drafter_spec, n_ctx, 512, 1);
    std::mt19937 rng(seed);

    for (int depth : depths) {
        target->clear();
        drafter->clear();
        if (depth > 0) {
            target->forward(random_tokens(rng, target->n_vocab(), depth), false);
            drafter->forward(random_tokens(rng, drafter->n_vocab(), depth), false);
        }
        const llama_token dtok = random_tokens(rng, drafter->n_vocab(), 1)[0];
        for (int w : widths) {
            const std::vector<llama_token> tokens = random_tokens(rng, target->n_vocab(), w);
            auto target_forward = [&]() {
                const int64_t us = target->forward(tokens, true);
                target->rollback(depth);
                return us;
            };
            // Alone.
            std::vector<int64_t> t_alone, d_alone, t_together, d_together;
            for (int i = 0; i < warmup; i++) target_forward();
            for (int i = 0; i < reps; i++) t_alone.push_back(target_forward());
            for (int i = 0; i < warmup; i++) drafter_step(*drafter, dtok, depth);
            for (int i = 0; i < drafter_alone_steps; i++) d_alone.push_back(drafter_step(*drafter, dtok, depth));

            // Together: the drafter loops until the target's timed forwards are done; only its
            // steps that end inside the target's timed span count.
            std::atomic<bool> running{false}, stop{false};
            std::atomic<int64_t> span_start{INT64_MAX}, span_end{0};
            std::atomic<int> in_span{0};
            std::vector<std::pair<int64_t, int64_t>> steps;  // (end time, us)
            std::exception_ptr error;
            std::thread lane([&]() {
                try {
                    while (!stop.load()) {
                        const int64_t us = drafter_step(*drafter, dtok, depth);
                        const int64_t end = now_us();
                        steps.emplace_back(end, us);
                        if (end - us >= span_start.load()) in_span.fetch_add(1);
                        running.store(true);
                    }
                } catch (...) {
                    error = std::current_exception();
                    running.store(true);
                }
            });
            while (!running.load()) std::this_thread::yield();
            for (int i = 0; i < warmup; i++) target_forward();
            span_start.store(now_us());
            // At least `reps` target forwards, and more until `reps` drafter steps ran inside them.
            for (int i = 0; i < reps || (in_span.load() < reps + 1 && i < 200 * reps); i++) {
                t_together.push_back(target_forward());
            }
            span_end.store(now_us());
            stop.store(true);
            lane.join();
            if (error) std::rethrow_exception(error);
            for (const auto & s : steps) {
                if (s.first - s.second >= span_start.load() && s.first <= span_end.load()) d_together.push_back(s.second);
            }

            const double ta = summarize(t_alone).median, tt = summarize(t_together).median;
            const double da = summarize(d_alone).median, dt = summarize(d_together).median;
            emit_result({{"kind", "cosched"},
                         {"width", w},
                         {"depth", depth},
                         {"rho_target", ta > 0 ? tt / ta : 0.0},
                         {"rho_drafter", da > 0 && !d_together.empty() ? json(dt / da) : json(nullptr)},
                         {"target_alone_us", ta},
                         {"target_together_us", tt},
                         {"drafter_alone_us", da},
                         {"drafter_together_us", d_together.empty() ? json(nullptr) : json(dt)},
                         {"target_threads", target_spec.threads},
                         {"drafter_threads", drafter_spec.threads},
                         {"warmup", warmup},
                         {"repetitions", reps},
                         {"spread", {{"target_alone", spread(t_alone)},
                                     {"target_together", spread(t_together)},
                                     {"drafter_alone", spread(d_alone)},
                                     {"drafter_together", spread(d_together)}}},
                         {"samples", {{"target_alone_us", t_alone},
                                      {"target_together_us", t_together},
                                      {"drafter_alone_us", d_alone},
                                      {"drafter_together_us", d_together}}}});
        }
    }
}
