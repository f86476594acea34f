// What the timing modes (sweep, cosched, probe) share: random token contexts, the summary of a
// timing's samples, the rule that says how many samples a cell takes, and one sample of the
// lookup drafter's cost.
#pragma once

#include "engine.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

// n token ids drawn uniformly from [0, n_vocab): a context whose length matters, not its content.
std::vector<llama_token> random_tokens(std::mt19937 & rng, int n_vocab, int n);

// One timing's samples summarized. Computed over the samples sorted, so that it does not
// depend on their order; min and max keep the samples' type (integer microseconds stay integers).
template <class T> struct SampleSummary {
    size_t n = 0;
    double median = 0.0;  // the middle sample, or the mean of the middle two; 0 without samples
    double mean = 0.0;
    double stdev = 0.0;   // the sample standard deviation (n - 1); 0 below two samples
    T min{};
    T max{};
};

template <class T> SampleSummary<T> summarize(std::vector<T> samples) {
    SampleSummary<T> s;
    s.n = samples.size();
    if (s.n == 0) return s;
    std::sort(samples.begin(), samples.end());
    const size_t n = s.n;
    s.median = n % 2 ? (double) samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
    double var = 0.0;
    for (const T x : samples) var += ((double) x - s.mean) * ((double) x - s.mean);
    s.stdev = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
    s.min = samples.front();
    s.max = samples.back();
    return s;
}

// One sample of the lookup drafter's cost over `ctx` (at most 16 candidates), in microseconds:
// one lookup takes far less than the clock's 1 µs tick, so the mean over a batch that runs for
// at least 1 ms and 100 lookups.
double lookup_sample_us(const std::vector<llama_token> & ctx);

// How many timed samples a cell takes (docs/METHODS.md §4.2 Forward costs: CT, CD and the all-rows table): a
// fixed count (precision 0: min_n == max_n), or samples until the half-width of a distribution-free ~95% confidence
// interval of the median is at most `precision` x the median, between min_n and max_n. The interval is
// [x(l), x(n + 1 - l)] of the sorted samples, l the 2.5% quantile of Binomial(n, 1/2) (at least 1); the
// Python twin is specbench/core/repetitions.py, and tests check the two agree.
struct RepetitionRule {
    double precision = 0.0;  // relative half-width to reach; 0: a fixed count
    int min_n = 5;
    int max_n = 5;
    bool fixed() const { return precision <= 0.0; }
};

constexpr int MAX_PRECISION_REPETITIONS = 1000;  // Binomial(n, 1/2) probabilities stay normal doubles

// The rule of a job: "repetitions" (a fixed count, default 5) or "precision" with
// "min_repetitions" (default 5) and "max_repetitions" (default 30), each range-checked.
RepetitionRule parse_repetition_rule(JobObject & job);

// The 1-based rank l of the interval's lower end for n samples (the upper end is n + 1 - l).
size_t median_interval_rank(size_t n);

// Half-width of the median's interval / median, of sorted samples; -1 when the median is <= 0
// and the interval has a width (no relative precision exists).
template <class T> double relative_half_width(const std::vector<T> & sorted) {
    const size_t n = sorted.size();
    if (n == 0) return -1.0;
    const size_t l = median_interval_rank(n);
    const double median = n % 2 ? (double) sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    const double half = (double) (sorted[n - l] - sorted[l - 1]) / 2.0;
    if (half == 0.0) return 0.0;
    return median > 0.0 ? half / median : -1.0;
}

template <class T> double achieved_precision(std::vector<T> samples) {
    std::sort(samples.begin(), samples.end());
    return relative_half_width(samples);
}

// True once a cell with these samples (in the order taken) stops.
template <class T> bool rule_done(const RepetitionRule & rule, const std::vector<T> & samples) {
    const int n = (int) samples.size();
    if (n >= rule.max_n) return true;
    if (n < rule.min_n || rule.fixed()) return false;
    const double p = achieved_precision(samples);
    return p >= 0.0 && p <= rule.precision;
}

// The rule's keys in a cell's record: what was asked, how many samples, what they reached.
template <class T> json rule_fields(const RepetitionRule & rule, const std::vector<T> & samples) {
    const double p = achieved_precision(samples);
    json out = {{"repetitions", samples.size()},
                {"precision", rule.fixed() ? json(nullptr) : json(rule.precision)},
                {"min_repetitions", rule.min_n},
                {"max_repetitions", rule.max_n},
                {"achieved_precision", p >= 0.0 ? json(p) : json(nullptr)}};
    out["converged"] = rule.fixed() ? json(nullptr) : json(p >= 0.0 && p <= rule.precision);
    return out;
}

// Samples of `cells` cells taken in rounds until each cell's rule says done: a round takes one
// sample of every cell not yet done, every other round in reverse order, so drift reaches every
// cell alike; `sample(i)` times cell i once.
template <class T, class Sample> std::vector<std::vector<T>> repeat_cells(size_t cells, const RepetitionRule & rule,
                                                                       Sample && sample) {
    std::vector<std::vector<T>> out(cells);
    std::vector<size_t> active(cells);
    std::iota(active.begin(), active.end(), size_t{0});
    for (size_t round = 0; !active.empty(); round++) {
        for (size_t j = 0; j < active.size(); j++) {
            const size_t i = active[round % 2 ? active.size() - 1 - j : j];
            out[i].push_back(sample(i));
        }
        std::vector<size_t> left;
        for (size_t i : active) {
            if (!rule_done(rule, out[i])) left.push_back(i);
        }
        active.swap(left);
    }
    return out;
}
