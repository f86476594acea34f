// Audio prompts through libmtmd (Qwen3-ASR: a qwen3vl text model + a qwen3a mmproj).
// A window's prompt text holds one media marker <__media__>; libmtmd splits it into text
// chunks and one audio chunk whose embeddings are decoded into the KV like tokens. The
// part up to and including the audio is the background prefill; the text after it is the
// residual instruction prefill, which starts the request clock.
#pragma once

#include "engine.h"

#include <memory>
#include <string>
#include <vector>

struct Window;

// One model's tokenized audio prompt (mtmd chunks); opaque outside audio.cpp.
struct MediaPrompt;

// Opens `m`'s mmproj (ModelSpec::mmproj) when some window has audio, tokenizes each audio
// window's prompt for this model (placeholder ids of the right length go into
// w.prompt / w.drafter_prompt, so every KV length and rollback stays prompt + n) and, when
// `resize` is set, grows the context to fit prompt + cap + extra. Job errors name the file.
void attach_audio(Model & m, std::vector<Window> & windows, bool drafter, int extra, bool resize);

// Prefills the prompt of window `w` into `m` (cleared first): background part, then the
// instruction part. Returns the synchronized times in microseconds.
struct PrefillPart {
    int64_t audio_us = 0;        // up to and including the audio chunk (0 for text windows)
    int64_t instruction_us = 0;  // the rest (the whole prompt for text windows)
};
PrefillPart prefill_background(Model & m, const Window & w, bool drafter);
int64_t prefill_instruction(Model & m, const Window & w, bool drafter);

int media_tokens(const Window & w, bool drafter);  // audio embeddings in the prompt (0: text)
