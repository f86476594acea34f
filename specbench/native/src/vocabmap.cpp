#include "vocabmap.h"

#include <algorithm>

size_t complete_utf8_prefix(const std::string & s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        const unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < len ? n - back : n;
    }
    return n;
}

size_t valid_utf8_prefix(const std::string & s, bool & incomplete) {
    incomplete = false;
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = (unsigned char) s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) return i;
        for (size_t k = 1; k < len; k++) {
            if (i + k >= s.size()) {
                incomplete = true;
                return i;
            }
            if (((unsigned char) s[i + k] & 0xC0) != 0x80) return i;
        }
        i += len;
    }
    return i;
}

int StreamMapper::flush_prefix(size_t n, int at_step) {
    if (n == 0) return 0;
    const std::vector<llama_token> u = target_.tokenize(pending_.substr(0, n), false);
    return emit(u, (int) u.size(), at_step);
}

int StreamMapper::emit_byte(int at_step) {
    const llama_token t = target_.byte_token((unsigned char) pending_[0]);
    if (t < 0) {
        throw JobError("cannot map the drafter's text to the target's tokens: the drafter (" + drafter_.path() +
                           ") produced a byte that is not valid UTF-8 and the target (" + target_.path() +
                           ") has no token for that byte",
                       "use a same-vocabulary drafter");
    }
    tokens.push_back(t);
    conf.push_back(byte_conf_[0]);
    step.push_back(at_step);
    pending_.erase(0, 1);
    byte_conf_.erase(byte_conf_.begin());
    return 1;
}

int StreamMapper::emit(const std::vector<llama_token> & u, int n, int at_step) {
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        const std::string p = target_.piece(u[i], false);
        if (pending_.compare(offset, p.size(), p) != 0) {
            throw JobError("cannot map the drafter's text to the target's tokens: the target (" + target_.path() +
                               ") tokenizes a drafter (" + drafter_.path() + ") text into token " + std::to_string(u[i]) +
                               " whose text does not match it",
                           "the two tokenizers do not round-trip this text; use a same-vocabulary drafter");
        }
        double c = 1.0;
        for (size_t b = offset; b < offset + p.size(); b++) c = std::min(c, byte_conf_[b]);
        tokens.push_back(u[i]);
        conf.push_back(c);
        step.push_back(at_step);
        offset += p.size();
    }
    pending_.erase(0, offset);
    byte_conf_.erase(byte_conf_.begin(), byte_conf_.begin() + offset);
    return n;
}

int StreamMapper::push(llama_token d, double c, int at_step) {
    if (ended_) return 0;
    if (drafter_.is_eog(d)) {
        const int n = finish(at_step);
        // The drafter's end token as the target's: its special text if that is one target
        // end-of-generation token, else the target's end of turn.
        const std::vector<llama_token> tt = target_.tokenize(drafter_.piece(d, true), true);
        tokens.push_back(tt.size() == 1 && target_.is_eog(tt[0]) ? tt[0] : target_.end_token());
        conf.push_back(c);
        step.push_back(at_step);
        return n + 1;
    }
    const std::string p = drafter_.piece(d, false);
    if (p.empty()) return 0;  // a control token with no text changes nothing
    pending_ += p;
    byte_conf_.insert(byte_conf_.end(), p.size(), c);
    int n = 0;
    bool incomplete = false;
    size_t v = valid_utf8_prefix(pending_, incomplete);
    while (v < pending_.size() && !incomplete) {  // an invalid byte at v: the text before it is final
        n += flush_prefix(v, at_step);
        n += emit_byte(at_step);
        prev_.clear();
        v = valid_utf8_prefix(pending_, incomplete);
    }
    const std::vector<llama_token> u = v ? target_.tokenize(pending_.substr(0, v), false) : std::vector<llama_token>();
    size_t j = 0;
    while (j + 1 < u.size() && j < prev_.size() && u[j] == prev_[j]) j++;
    n += emit(u, (int) j, at_step);
    prev_.assign(u.begin() + j, u.end());
    return n;
}

int StreamMapper::finish(int at_step) {
    if (ended_) return 0;
    ended_ = true;
    prev_.clear();
    int n = 0;
    while (!pending_.empty()) {
        bool incomplete = false;
        const size_t v = valid_utf8_prefix(pending_, incomplete);
        n += flush_prefix(v, at_step);
        if (!pending_.empty()) n += emit_byte(at_step);
    }
    return n;
}

ProducerMapper::ProducerMapper(const Model & target, const Model & drafter, bool cross, int cap)
    : drafter_(drafter), cross_(cross), cap_(cap), max_steps_(cross ? 4 * cap + 16 : cap), out_(target, drafter) {}

bool ProducerMapper::push(llama_token d, double c, int at_step) {
    if (!cross_) {
        out_.tokens.push_back(d);
        out_.conf.push_back(c);
        out_.step.push_back(at_step);
        eos_ = drafter_.is_eog(d);
        return eos_ || (int) out_.tokens.size() >= cap_;
    }
    out_.push(d, c, at_step);
    bool done = out_.ended() || (int) out_.tokens.size() >= cap_;
    if (!done && at_step + 1 >= max_steps_) {
        out_.finish(at_step);
        done = true;
    }
    if (done) {
        const bool cut = (int) out_.tokens.size() > cap_;
        if (cut) {
            out_.tokens.resize(cap_);
            out_.conf.resize(cap_);
            out_.step.resize(cap_);
        }
        eos_ = drafter_.is_eog(d) && !cut;  // the stream ends with the mapped end token
    }
    return done;
}

std::vector<llama_token> target_to_drafter(const Model & target, const Model & drafter,
                                           const std::vector<llama_token> & y, int n) {
    std::vector<llama_token> part(y.begin(), y.begin() + n);
    std::string text = target.detokenize(part, false);
    text.resize(complete_utf8_prefix(text));
    if (text.empty()) return {};
    return drafter.tokenize(text, false);
}

void check_mappable(const Model & target, const Model & drafter) {
    target.build_byte_tokens();
    drafter.build_byte_tokens();
    const std::string probe = "Hello, world! The quick brown fox jumps over 13 lazy dogs.\nCaf\xc3\xa9 \xe2\x80\x94 ok?  Yes.";
    for (const Model * m : {&target, &drafter}) {
        const std::string back = m->detokenize(m->tokenize(probe, false), false);
        if (back != probe) {
            throw JobError("cannot map between the vocabularies of the target (" + target.path() + ") and the drafter (" +
                               drafter.path() + "): the " + m->role() + "'s tokenizer does not round-trip text (got '" +
                               back.substr(0, 80) + "')",
                           "cross-vocabulary drafting maps tokens through text; use a same-vocabulary drafter");
        }
    }
}
