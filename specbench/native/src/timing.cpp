#include "timing.h"

#include "lookup.h"

#include <cmath>

std::vector<llama_token> random_tokens(std::mt19937 & rng, int n_vocab, int n) {
    std::uniform_int_distribution<int> dist(0, n_vocab - 1);
    std::vector<llama_token> t(n);
    for (auto & x : t) x = dist(rng);
    return t;
}

namespace {
size_t g_lookup_sink = 0;  // keeps the timed lookups from being optimized away
}  // namespace

double lookup_sample_us(const std::vector<llama_token> & ctx) {
    const int64_t start = now_us();
    int64_t n = 0, elapsed = 0;
    do {
        g_lookup_sink += prompt_lookup(ctx.data(), (int) ctx.size(), 16).size();
        n++;
        elapsed = now_us() - start;
    } while (elapsed < 1000 || n < 100);
    return (double) elapsed / (double) n;
}

size_t median_interval_rank(size_t n) {
    // the 2.5% quantile of Binomial(n, 1/2): the smallest k with P(B <= k) >= 0.025
    double pmf = std::ldexp(1.0, -(int) n), cdf = pmf;
    size_t k = 0;
    while (cdf < 0.025 && k < n) {
        pmf = pmf * (double) (n - k) / (double) (k + 1);
        k++;
        cdf += pmf;
    }
    return std::max<size_t>(k, 1);
}

RepetitionRule parse_repetition_rule(JobObject & job) {
    const bool fixed = job.has("repetitions");
    const bool precise = job.has("precision");
    const bool bounds = job.has("min_repetitions") || job.has("max_repetitions");
    RepetitionRule rule;
    if (fixed && (precise || bounds)) {
        throw JobError("job key 'repetitions' (a fixed count) goes without 'precision', 'min_repetitions' and "
                       "'max_repetitions'");
    }
    if (!precise) {
        if (bounds) throw JobError("job keys 'min_repetitions' and 'max_repetitions' need 'precision'");
        rule.min_n = rule.max_n = job.get<int>("repetitions", 5);
        if (rule.min_n < 5) {
            throw JobError("job key 'repetitions' must be >= 5 (got " + std::to_string(rule.min_n) + ")",
                           "medians of fewer than 5 samples are not reported; "
                           "see docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table");
        }
        return rule;
    }
    rule.precision = job.get<double>("precision", 0.0);
    rule.min_n = job.get<int>("min_repetitions", 5);
    rule.max_n = job.get<int>("max_repetitions", 30);
    if (!(rule.precision > 0.0 && rule.precision < 1.0)) {
        throw JobError("job key 'precision': expected a fraction of the median in (0, 1), e.g. 0.02, got " +
                       std::to_string(rule.precision));
    }
    if (rule.min_n < 5) {
        throw JobError("job key 'min_repetitions' must be >= 5 (got " + std::to_string(rule.min_n) + ")");
    }
    if (rule.max_n < rule.min_n || rule.max_n > MAX_PRECISION_REPETITIONS) {
        throw JobError("job key 'max_repetitions' must be between 'min_repetitions' (" + std::to_string(rule.min_n) +
                       ") and " + std::to_string(MAX_PRECISION_REPETITIONS) + " (got " + std::to_string(rule.max_n) +
                       ")");
    }
    return rule;
}
