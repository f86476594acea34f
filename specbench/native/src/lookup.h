// Prompt-lookup (n-gram) drafting: a drafter with no model (docs/METHODS.md §2.7 Prompt-lookup drafting), exactly
// specbench/core/methods/lookup.py prompt_lookup. The candidates copy what followed the most
// recent earlier occurrence of the context's longest matching suffix (LOOKUP_MAX_NGRAM tokens
// down to 1) in prompt + committed output.
#pragma once

#include "engine.h"

#include <vector>

constexpr int LOOKUP_MAX_NGRAM = 3;
// The name a job gives instead of a drafter model: "drafter": {"lookup": "pld"}.
constexpr const char * LOOKUP_NAME = "pld";

// Up to `limit` candidates after ctx[0..n): for the longest suffix of 3, 2 or 1 tokens that
// occurs earlier in ctx, the tokens that followed its most recent earlier occurrence (an
// occurrence may overlap the suffix itself). None when no suffix recurs or limit <= 0.
std::vector<llama_token> prompt_lookup(const llama_token * ctx, int n, int limit);

// The job's "drafter": a model ({"path", ...}) or the lookup drafter ({"lookup": "pld"}).
struct DrafterChoice {
    bool present = false;
    bool lookup = false;
    ModelSpec spec;  // a model drafter only
};
DrafterChoice parse_drafter(JobObject & job, int default_threads);
