#include "timing.h"

#include "lookup.h"

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
