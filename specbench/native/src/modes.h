// The runner's job modes and the pieces they share.
#pragma once

#include "engine.h"
#include "lookup.h"
#include "protocol.h"

#include <memory>
#include <string>
#include <vector>

void run_sweep(JobObject & job);
void run_decode(JobObject & job);
void run_trace(JobObject & job);
void run_tokenize(JobObject & job);
void run_detokenize(JobObject & job);
void run_cosched(JobObject & job);
void run_probe(JobObject & job);

// The methods `decode` implements: what --version lists and what an unknown method's error names.
const std::vector<std::string> & decode_methods();
// "a, b, c": a list of names in an error's hint.
std::string join_names(const std::vector<std::string> & names);

// Keys every model-running job shares.
struct CommonOptions {
    int threads = 0;  // default for both models
    int n_ctx = 0;    // 0: sized from the job
};
CommonOptions parse_common(JobObject & job);

// The start every model-running job shares: its common keys, the target and the drafter.
enum class DrafterNeed {
    optional,  // a model, the lookup drafter, or none
    required,  // a model or the lookup drafter
    model,     // a model
};
struct JobModels {
    CommonOptions common;
    ModelSpec target;
    DrafterChoice drafter;
};
JobModels parse_job_models(JobObject & job, DrafterNeed need);

struct MediaPrompt;  // audio.h

// One request: prompt token ids for each model (same text, each model's tokenizer and
// template, applied on the Python side) and the cap on committed tokens N.
struct Window {
    std::string id;
    std::vector<llama_token> prompt;          // target prompt ids
    std::vector<llama_token> drafter_prompt;  // defaults to `prompt` (same vocabulary)
    int cap = 0;                              // max_new_tokens: N <= cap
    std::vector<llama_token> reference;       // decode only: expected y, checked token by token
    std::vector<llama_token> input;           // the input view alone in target tokens (the lookup
                                              // drafter's AS2D stream); empty when not given
    // Audio windows: 16 kHz mono samples in `audio_path` (raw little-endian `audio_format`:
    // "f32" or "s16") and prompt texts with one <__media__> marker; attach_audio() fills
    // `prompt` / `drafter_prompt` with placeholders of the prompt's KV length.
    std::string audio_path, audio_format, prompt_text, drafter_prompt_text;
    std::shared_ptr<const MediaPrompt> media, drafter_media;
    // whisper.cpp models: the window's samples, which each model's encoder hears (attach_audio).
    std::shared_ptr<const std::vector<float>> pcm;
    bool is_audio() const { return !audio_path.empty(); }
};
std::vector<Window> parse_windows(JobObject & job, bool allow_reference);

// n_ctx large enough for every window plus `extra` positions, rounded up to 256.
int size_context(const std::vector<Window> & windows, int extra, bool drafter);
int max_cap(const std::vector<Window> & windows);

// One forward in a decode's op log.
struct Op {
    const char * model;  // "target" | "drafter"
    int width;           // tokens in the forward
    int depth;           // KV length before it
    int accepted;        // target only: accepted candidates; -1 for the drafter
    int64_t us;          // its synchronized wall time
    json extra = nullptr;  // more keys for this op's JSON (an object), or null
    int64_t start_us = -1;  // now_us() when the forward began (-1: not recorded)
};
json op_json(const Op & op);
// The op of `m`'s last forward, which took `us`: its start is the model's.
Op forward_op(const char * model, const Model & m, int width, int depth, int accepted, int64_t us, json extra = nullptr);
// Each op's start on the decode clock that began at `clock_start`, as its "t_us": the time between one
// forward's end and the next one's start is the host work a profile prices
// (docs/METHODS.md §4.4 Overheads).
void stamp_ops(std::vector<Op> & ops, int64_t clock_start);

// One verification: the target runs [y.back()] + c with logits for every row, accepts the
// longest agreeing prefix (an accepted end-of-generation token ends it), appends the
// correction / bonus unless the cap is reached, logs the op and rolls its KV back to
// prompt + y[:-1]. Returns the accepted count.
int verify_round(Model & target, std::vector<llama_token> & y, const std::vector<llama_token> & c, const Window & w,
                 std::vector<Op> & ops, json extra = nullptr);

// AS2D's parameters (specbench/core/methods/as2d.py As2dConfig).
struct As2dParams {
    int budget = 7;       // B: most candidates per verification
    int batch = 8;        // tokens per published batch
    double conf_stop = 0.0;
    std::string align = "anchor";  // "anchor" | "positional"
    int horizon = 8;      // H
};
As2dParams parse_as2d(JobObject & mo);  // reads the keys; the caller calls done()

// The initial prefill of a window, both models (the two clocks, docs/METHODS.md §1.3 Two clocks): the background
// part (audio) of each model, then the request instant, then the residual instruction of
// the target (its logits give y[0]) and of the drafter. Text windows: all instruction.
struct Prefill {
    int64_t audio_us = 0;        // background prefill, both models
    int64_t instruction_us = 0;  // residual prefill after the request instant, both models
    int64_t first_token_us = 0;  // request instant -> y[0] known (target's instruction done)
    int64_t first_draft_us = -1; // request instant -> drafter ready to draft; -1: no drafter
    bool audio_reused = false;   // an encoder kept the window's output from the decode before (reuse_audio_prefill)
    int64_t total_us() const { return audio_us + instruction_us; }
};
Prefill prefill_window(Model & target, Model * drafter, const Window & w);
// Whether two lanes' CPU sets are both pinned and share no CPU (a split placement).
bool lanes_apart(const Model & a, const Model & b);
// Both Whisper models of a split placement encode the window at once, each on its own lane (as a phone's two
// lanes hear the audio), ahead of the window's decodes (Model::encode_audio_ahead; they keep their outputs with
// reuse_audio_prefill). A no-op unless both models hear audio and their lanes are apart.
void encode_window_ahead(Model & target, Model * drafter, const Window & w);
// Result keys of the request clock (decode_us: end of the prefills to the last commit).
json prefill_json(const Prefill & p, const Window & w, int64_t decode_us, bool with_drafter);

// One method run on one window (decode).
struct DecodeRun {
    std::vector<llama_token> tokens;
    std::string stop_reason;
    int64_t prefill_us = 0;  // all initial prefills, before the decode clock starts
    int64_t decode_us = 0;
    std::vector<Op> ops;
    json extra = json::object();  // method-specific result keys (as2d: "producer", ...)
    Prefill prefill;
};

// AS2D (docs/METHODS.md §2.5 AS2D) for real: the producer on its own thread, the target never waiting.
// cross: the drafter's vocabulary differs (its tokens are mapped through text).
DecodeRun run_as2d(Model & target, Model & drafter, const Window & w, const As2dParams & p, bool cross);
// AS2D whose producer is the lookup drafter: the stream is the window's `input`, published at once.
DecodeRun run_as2d_input(Model & target, const Window & w, const As2dParams & p);

// Target greedy decode after the prompt, one token per forward: y[0] from the prefill
// logits, then until an EOG token or `cap` tokens. This defines the reference y.
struct GreedyRun {
    std::vector<llama_token> y;
    std::vector<float> margin;  // top-1 minus top-2 logit behind each y[t]
    std::string stop_reason;  // "eos" | "cap"
    int64_t prefill_us = 0;
    int64_t decode_us = 0;    // end of prefill to last commit
    std::vector<Op> ops;
    Prefill prefill;
};
// with_margins: also record top-1/top-2 margins (a softmax-free but full extra pass).
GreedyRun greedy_target(Model & target, const Window & w, bool with_margins);

std::unique_ptr<Model> load_model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs);

// How a job over windows (decode, trace) sizes and loads its models: each model's context holds
// every window's prompt + cap + its `extra` positions (the job's n_ctx instead when given), and
// its forwards keep logits for at most `outputs` rows.
struct ModelLoad {
    int target_extra = 0;
    int target_outputs = 1;
    int drafter_extra = 0;
    int drafter_outputs = 1;
    int cross_extra = 0;          // a drafter of another vocabulary: its positions past its prompt +
                                  // 3 x the longest cap (mapped streams take up to 3 per target token)
    std::string same_vocab_for;   // non-empty: what refuses a drafter of another vocabulary
    std::string same_vocab_hint;
};
struct LoadedModels {
    std::unique_ptr<Model> target;
    std::unique_ptr<Model> drafter;  // null: no drafter, or the lookup drafter
    bool cross = false;              // the drafter's vocabulary differs from the target's
};
// Loads the target and, with `with_drafter`, the job's drafter model, attaching each one's audio
// prompts; a drafter of another vocabulary must map through text (check_mappable).
LoadedModels load_models(const JobModels & job, std::vector<Window> & windows, const ModelLoad & load,
                         bool with_drafter);
// The lookup drafter reads prompt token ids: an audio window is refused.
void refuse_audio_for_lookup(const Window & w);
