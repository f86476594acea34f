// specbench-whisper-check MODEL WAV WIDTH THREADS [ENCODER_THREADS]: batched verification on whisper.cpp,
// checked against width-1 decoding on one audio file (16 kHz mono 16-bit WAV); the encoder runs on
// ENCODER_THREADS (default THREADS), every decode on THREADS.
//
// 1. Greedy width-1 decoding after the prompt <|startoftranscript|> [<|en|>] <|transcribe|> <|notimestamps|>
//    (argmax over the text tokens and <|endoftext|>), keeping each step's logits.
// 2. Rollback to n_past 0, the prompt again, then the same tokens fed WIDTH at a time through
//    whisper_decode_all_logits_with_state: every row is compared with the width-1 logits of the same prefix
//    (WIDTH 1 repeats step 1's computations: no difference at all).
// 3. Rollback of rejected drafts: WIDTH-1 wrong tokens after the first generated one, then decoding at the
//    rolled-back n_past must give the width-1 logits again.
// Prints one JSON object: the tokens, the text, a hash of every width-1 logit's bits (FNV-1a, 64 bits: two runs
// that differ only in ENCODER_THREADS compare the encoder's outputs through it), the largest |difference| of any
// logit, the rows whose argmax differs with their width-1 top-2 margin, and the rollback's largest difference.
#include "whisper.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

static bool read_wav(const char * path, std::vector<float> & out) {
    FILE * f = fopen(path, "rb");
    if (!f) return false;
    std::vector<unsigned char> buf;
    unsigned char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + n);
    fclose(f);
    if (buf.size() < 44 || memcmp(buf.data(), "RIFF", 4) != 0) return false;
    size_t off = 12;
    while (off + 8 <= buf.size()) {
        uint32_t size;
        memcpy(&size, &buf[off + 4], 4);
        if (memcmp(&buf[off], "data", 4) == 0) {
            size_t count = std::min<size_t>(size, buf.size() - off - 8) / 2;
            out.resize(count);
            for (size_t i = 0; i < count; ++i) {
                int16_t s;
                memcpy(&s, &buf[off + 8 + 2 * i], 2);
                out[i] = s / 32768.0f;
            }
            return true;
        }
        off += 8 + size + (size & 1);
    }
    return false;
}

static int argmax(const float * row, int n) {
    return int(std::max_element(row, row + n) - row);
}

static float margin(const float * row, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; ++i) {
        if (row[i] > a) { b = a; a = row[i]; } else if (row[i] > b) { b = row[i]; }
    }
    return a - b;
}

int main(int argc, char ** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MODEL WAV WIDTH THREADS [ENCODER_THREADS]\n", argv[0]);
        return 2;
    }
    const int width = atoi(argv[3]), threads = atoi(argv[4]);
    const int encoder_threads = argc == 6 ? atoi(argv[5]) : threads;
    if (width < 1 || width > 64 || threads < 1 || encoder_threads < 1) {
        fprintf(stderr, "error: WIDTH must be 1..64, THREADS and ENCODER_THREADS >= 1 (got %s, %s, %s)\n", argv[3],
                argv[4], argc == 6 ? argv[5] : argv[4]);
        return 2;
    }
    std::vector<float> pcm;
    if (!read_wav(argv[2], pcm)) {
        fprintf(stderr, "error: %s: not a 16-bit PCM WAV file\n", argv[2]);
        return 1;
    }
    whisper_context_params cparams = whisper_context_default_params();
    cparams.use_gpu = false;
    whisper_context * ctx = whisper_init_from_file_with_params_no_state(argv[1], cparams);
    if (!ctx) {
        fprintf(stderr, "error: %s: whisper.cpp could not load it\n", argv[1]);
        return 1;
    }
    whisper_state * st = whisper_init_state(ctx);
    if (!st || whisper_pcm_to_mel_with_state(ctx, st, pcm.data(), int(pcm.size()), encoder_threads) != 0 ||
        whisper_encode_with_state(ctx, st, 0, encoder_threads) != 0) {
        fprintf(stderr, "error: encoding %s failed\n", argv[2]);
        return 1;
    }
    const int n_vocab = whisper_n_vocab(ctx);
    const whisper_token eot = whisper_token_eot(ctx);
    std::vector<whisper_token> prompt = {whisper_token_sot(ctx)};
    if (whisper_is_multilingual(ctx)) prompt.push_back(whisper_token_lang(ctx, whisper_lang_id("en")));
    prompt.push_back(whisper_token_transcribe(ctx));
    prompt.push_back(whisper_token_not(ctx));
    const int n_prompt = int(prompt.size());

    // 1. width-1 greedy: logits1[k] is the prediction after the prompt and tokens[0..k)
    std::vector<std::vector<float>> logits1;
    std::vector<whisper_token> tokens;
    if (whisper_decode_with_state(ctx, st, prompt.data(), n_prompt, 0, threads) != 0) return 1;
    while (true) {
        const float * row = whisper_get_logits_from_state(st) + (n_prompt - 1) * n_vocab * (tokens.empty());
        logits1.emplace_back(row, row + n_vocab);
        const whisper_token next = argmax(row, eot + 1);
        if (next == eot || tokens.size() >= 200) break;
        tokens.push_back(next);
        if (whisper_decode_with_state(ctx, st, &next, 1, n_prompt + int(tokens.size()) - 1, threads) != 0) return 1;
    }
    std::string text;
    for (whisper_token t : tokens) text += whisper_token_to_str(ctx, t);
    uint64_t hash = 1469598103934665603ull;
    for (const std::vector<float> & row : logits1) {
        const unsigned char * bytes = reinterpret_cast<const unsigned char *>(row.data());
        for (size_t i = 0; i < row.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
    }

    // 2. rollback to n_past 0: the prompt in one forward (as in 1; its last row predicts tokens[0]), then the
    //    tokens WIDTH at a time: row i of a forward fed at tokens[pos..] predicts what follows tokens[pos+i]
    double max_diff = 0;
    std::string mismatches;
    int rows = 0;
    auto compare = [&](const float * row, int k) {  // k: logits1 index, the prediction after k tokens
        const std::vector<float> & ref = logits1[k];
        for (int v = 0; v < n_vocab; ++v) max_diff = std::max(max_diff, double(std::fabs(row[v] - ref[v])));
        if (argmax(row, eot + 1) != argmax(ref.data(), eot + 1)) {
            char buf[96];
            snprintf(buf, sizeof buf, "%s{\"row\":%d,\"margin\":%.6f}", mismatches.empty() ? "" : ",", k,
                     margin(ref.data(), eot + 1));
            mismatches += buf;
        }
        ++rows;
    };
    if (whisper_decode_all_logits_with_state(ctx, st, prompt.data(), n_prompt, 0, threads) != 0) return 1;
    compare(whisper_get_logits_from_state(st) + (n_prompt - 1) * n_vocab, 0);
    for (int pos = 0; pos < int(tokens.size()); pos += width) {
        const int n = std::min(width, int(tokens.size()) - pos);
        if (whisper_decode_all_logits_with_state(ctx, st, &tokens[pos], n, n_prompt + pos, threads) != 0) return 1;
        for (int i = 0; i < n; ++i) compare(whisper_get_logits_from_state(st) + i * n_vocab, pos + i + 1);
    }

    // 3. rejected drafts: after the first token, WIDTH-1 arbitrary other text tokens,
    //    then the second token decoded at the rolled-back n_past
    double rollback_diff = -1;
    if (tokens.size() >= 2 && width >= 2) {
        std::vector<whisper_token> drafts = {tokens[0]};
        for (int i = 1; i < width; ++i) drafts.push_back((tokens[0] + 1000 * i) % eot);
        if (whisper_decode_all_logits_with_state(ctx, st, drafts.data(), width, n_prompt, threads) != 0) return 1;
        if (whisper_decode_with_state(ctx, st, &tokens[1], 1, n_prompt + 1, threads) != 0) return 1;
        const float * row = whisper_get_logits_from_state(st);
        rollback_diff = 0;
        for (int v = 0; v < n_vocab; ++v) rollback_diff = std::max(rollback_diff, double(std::fabs(row[v] - logits1[2][v])));
    }

    std::string tok;
    for (size_t i = 0; i < tokens.size(); ++i) tok += (i ? "," : "") + std::to_string(tokens[i]);
    std::string esc;
    for (char c : text) {
        if (c == '"' || c == '\\') esc += '\\';
        if ((unsigned char) c >= 0x20) esc += c;
    }
    printf("{\"width\":%d,\"tokens\":[%s],\"text\":\"%s\",\"logits_fnv1a\":\"%016llx\",\"rows\":%d,"
           "\"max_abs_diff\":%.6g,\"argmax_mismatches\":[%s],\"rollback_max_abs_diff\":%.6g}\n",
           width, tok.c_str(), esc.c_str(), (unsigned long long) hash, rows, max_diff, mismatches.c_str(),
           rollback_diff);
    whisper_free_state(st);
    whisper_free(ctx);
    return 0;
}
