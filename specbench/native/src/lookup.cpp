#include "lookup.h"

#include <algorithm>

std::vector<llama_token> prompt_lookup(const llama_token * ctx, int n, int limit) {
    if (limit <= 0) return {};
    for (int g = std::min(LOOKUP_MAX_NGRAM, n - 1); g >= 1; g--) {
        const llama_token * suffix = ctx + n - g;
        // Most recent first; the suffix's own position (n - g) is not a match.
        for (int start = n - g - 1; start >= 0; start--) {
            if (std::equal(suffix, suffix + g, ctx + start)) {
                const int follow = start + g;  // < n: a match always has a continuation
                return std::vector<llama_token>(ctx + follow, ctx + std::min(n, follow + limit));
            }
        }
    }
    return {};
}

DrafterChoice parse_drafter(JobObject & job, int default_threads) {
    DrafterChoice choice;
    if (!job.has("drafter")) return choice;
    choice.present = true;
    JobObject obj = job.object("drafter");
    if (obj.has("lookup")) {
        const std::string name = obj.need<std::string>("lookup");
        obj.done();
        if (name != LOOKUP_NAME) {
            throw JobError("job key 'drafter.lookup': unknown lookup drafter '" + name + "'",
                           std::string("available: ") + LOOKUP_NAME);
        }
        choice.lookup = true;
        return choice;
    }
    choice.spec = parse_model_spec(obj, "drafter", default_threads);
    return choice;
}
