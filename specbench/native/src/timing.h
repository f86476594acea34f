// What the timing modes (sweep, cosched, probe) share: random token contexts, the summary of a
// timing's samples, and one sample of the lookup drafter's cost.
#pragma once

#include "engine.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <random>
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
