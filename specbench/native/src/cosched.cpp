// "cosched": co-scheduling slowdowns (docs/METHODS.md §4.3 Co-scheduling ratios). The drafter's AR loop (one-token
// decodes) runs on its own thread and llama_context while the target runs width-w
// forwards with logits for every row on the calling thread; each is also timed alone.
// rho_target(w) = together / alone target forward time, rho_drafter(w) = together / alone
// drafter step time (medians).
//
// Per depth every width is warmed up first, then the cells run in a seeded random width order
// (recorded), each as ABBA rounds: one target forward alone (and drafter steps alone), two
// together, one alone, so that drift over a cell hits both sides alike. The job takes a given
// count; how many a cell needs (its ratio's interval against the profile's precision) is
// decided by the caller from the raw samples (specbench/core/repetitions.py).
#include "modes.h"
#include "timing.h"

#include <algorithm>
#include <atomic>
#include <map>
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
    const std::vector<std::vector<int>> cells_key = job.get<std::vector<std::vector<int>>>("cells", {});
    const int warmup = job.get<int>("warmup", 1);
    const int reps = job.get<int>("repetitions", 5);
    const int steps_per_burst = job.get<int>("drafter_steps", 4);
    const int seed = job.get<int>("seed", 42);
    job.done();
    if (reps < 1) throw JobError("job key 'repetitions' must be >= 1 (target forwards per side and cell)");
    if (warmup < 0 || steps_per_burst < 1) throw JobError("job keys 'warmup' >= 0 and 'drafter_steps' >= 1");
    // depth -> its widths, in the order given (the grid, or `cells`)
    std::map<int, std::vector<int>> plan;
    if (!cells_key.empty()) {
        for (const auto & c : cells_key) {
            if (c.size() != 2) throw JobError("job key 'cells': every cell is [width, depth]");
            plan[c[1]].push_back(c[0]);
        }
    } else {
        if (widths.empty() || depths.empty()) throw JobError("job keys 'widths' and 'depths' must not be empty");
        for (int d : depths) plan[d] = widths;
    }
    int max_w = 1, max_d = 0;
    for (const auto & [d, ws] : plan) {
        if (d < 0) throw JobError("job key 'depths': every depth must be >= 0");
        max_d = std::max(max_d, d);
        for (int w : ws) {
            if (w < 1) throw JobError("job key 'widths': every width must be >= 1");
            max_w = std::max(max_w, w);
        }
    }
    const int n_ctx = common.n_ctx > 0 ? common.n_ctx : (max_d + max_w + 8 + 255) / 256 * 256;
    std::vector<int> all_depths;
    for (const auto & entry : plan) all_depths.push_back(entry.first);
    emit_event("start", {{"mode", "cosched"}, {"depths", all_depths}, {"seed", seed}});
    auto target = load_model(target_spec, n_ctx, std::max(512, max_w), max_w);
    auto drafter = load_model(drafter_spec, n_ctx, 512, 1);
    std::mt19937 rng(seed);

    for (const auto & [depth, depth_widths] : plan) {
        target->clear();
        drafter->clear();
        if (depth > 0) {
            target->forward(random_tokens(rng, target->n_vocab(), depth), false);
            drafter->forward(random_tokens(rng, drafter->n_vocab(), depth), false);
        }
        const llama_token dtok = random_tokens(rng, drafter->n_vocab(), 1)[0];
        std::map<int, std::vector<llama_token>> tokens;
        for (int w : depth_widths) tokens[w] = random_tokens(rng, target->n_vocab(), w);
        std::vector<int> order = depth_widths;
        std::shuffle(order.begin(), order.end(), rng);
        auto target_forward = [&](int w) {
            const int64_t us = target->forward(tokens[w], true);
            target->rollback(depth);
            return us;
        };
        // Every width warmed up before any is timed: no cell is the first after the prefill.
        for (int w : order) {
            for (int i = 0; i < warmup; i++) target_forward(w);
        }
        for (int i = 0; i < warmup; i++) drafter_step(*drafter, dtok, depth);

        for (size_t position = 0; position < order.size(); position++) {
            const int w = order[position];
            std::vector<int64_t> t_alone, d_alone, t_together, d_together;
            std::string bursts;

            auto alone = [&]() {
                t_alone.push_back(target_forward(w));
                for (int i = 0; i < steps_per_burst; i++) d_alone.push_back(drafter_step(*drafter, dtok, depth));
                bursts += 'A';
            };
            // Together: the drafter loops until the target's `n` timed forwards are done (and more
            // until at least `n` drafter steps ran inside them); only steps inside the span count.
            auto together = [&](int n, int untimed) {
                std::atomic<bool> running{false}, stop{false};
                std::atomic<int64_t> span_start{INT64_MAX};
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
                for (int i = 0; i < untimed; i++) target_forward(w);
                span_start.store(now_us());
                for (int i = 0; i < n || (in_span.load() < n && i < 200 * n); i++) {
                    t_together.push_back(target_forward(w));
                    bursts += 'B';
                }
                const int64_t span_end = now_us();
                stop.store(true);
                lane.join();
                if (error) std::rethrow_exception(error);
                for (const auto & s : steps) {
                    if (s.first - s.second >= span_start.load() && s.first <= span_end) d_together.push_back(s.second);
                }
            };
            // ABBA rounds until `reps` alone; the last round of an odd count is AB.
            for (int done = 0; done < reps; done += 2) {
                alone();
                together(reps - done >= 2 ? 2 : 1, done == 0 ? warmup : 0);
                if (reps - done >= 2) alone();
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
                         {"seed", seed},
                         {"order", position},
                         {"width_order", order},
                         {"bursts", bursts},
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
