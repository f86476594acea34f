// Cross-vocabulary drafting through text: drafter tokens -> detokenize -> retokenize with
// the target's tokenizer, incrementally, for drafters of another vocabulary
// (docs/METHODS.md §2.5 AS2D). llama.cpp has no such translation.
#pragma once

#include "engine.h"

#include <string>
#include <vector>

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence (a byte
// token may split a character; the tokenizers would turn the partial bytes into U+FFFD).
size_t complete_utf8_prefix(const std::string & s);

// Length of the longest valid UTF-8 prefix of `s`; `incomplete`: what stops it is a
// sequence cut short at the end (more bytes may complete it), not an invalid byte.
size_t valid_utf8_prefix(const std::string & s, bool & incomplete);

// Maps a stream of drafter tokens to target tokens. A target token is emitted once it is
// stable: it is not the last token of the retokenized pending text, and the
// retokenization after one more drafter token still has it at the same place. Emitted
// tokens' text is consumed; only the pending text is retokenized. An end-of-generation
// drafter token flushes the pending text and emits the target's end token.
class StreamMapper {
  public:
    StreamMapper(const Model & target, const Model & drafter) : target_(target), drafter_(drafter) {}

    // One drafter token with its top-1 probability, produced at drafter step `step`.
    // Returns the number of target tokens it made stable (appended to tokens/conf/step).
    int push(llama_token d, double conf, int step);
    // The drafter's stream ends (EOG: already flushed by push; otherwise flush now).
    int finish(int step);
    bool ended() const { return ended_; }

    std::vector<llama_token> tokens;  // target token ids
    std::vector<double> conf;         // min over the drafter tokens whose text each covers
    std::vector<int> step;            // drafter step at which each became stable

  private:
    int emit(const std::vector<llama_token> & u, int n, int step);
    // Emits every token of pending_[0, n) (final text) and returns how many.
    int flush_prefix(size_t n, int step);
    // Invalid UTF-8 bytes (random or byte-level drafters make them) cannot go through the
    // tokenizer (it would read U+FFFD): each becomes the target token whose text is that byte.
    int emit_byte(int step);

    const Model & target_;
    const Model & drafter_;
    std::string pending_;              // text not yet covered by emitted tokens
    std::vector<double> byte_conf_;    // per pending byte: conf of the drafter token it came from
    std::vector<llama_token> prev_;    // retokenization of the pending text before the last push
    bool ended_ = false;
};

// The producer stream's stop rules, shared by trace and decode: same vocabulary, each
// drafter token is a target token (step i = i); otherwise through StreamMapper. Stops at
// the drafter's end of generation, at `cap` target tokens (cut there), or after
// `max_steps` drafter steps (then flushed).
class ProducerMapper {
  public:
    ProducerMapper(const Model & target, const Model & drafter, bool cross, int cap);
    // Drafter step `step` produced `d`. Returns true when the stream is complete.
    bool push(llama_token d, double conf, int step);
    int max_steps() const { return max_steps_; }
    const std::vector<llama_token> & tokens() const { return out_.tokens; }
    const std::vector<double> & conf() const { return out_.conf; }
    const std::vector<int> & step() const { return out_.step; }
    bool eos() const { return eos_; }

  private:
    const Model & drafter_;
    bool cross_;
    int cap_;
    int max_steps_;
    StreamMapper out_;
    bool eos_ = false;
};

// Committed target tokens as the drafter's tokens: detokenize with the target, tokenize the
// complete-UTF-8 part with the drafter.
std::vector<llama_token> target_to_drafter(const Model & target, const Model & drafter,
                                           const std::vector<llama_token> & y, int n);

// Throws a JobError naming both models when their tokenizers cannot round-trip a probe text
// (the mapping needs detokenize(tokenize(text)) == text on each side).
void check_mappable(const Model & target, const Model & drafter);
