// "divergence": explain where a decode's output left the reference (docs/METHODS.md §6.5 Divergences
// explained). For each case the target recomputes the differing position twice: the single-token way
// (prefill, then one forward per committed token: how the trace and target-only decide) and the way
// the decode did (its target forwards replayed with their widths, each rolled back to what it committed,
// then the forward that committed the position, read at its row). Both rows' top-2 logits, the logits
// of the expected and the committed token, and the largest logit difference between the two rows.
#include "modes.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace {

struct Case {
    std::string window_id;
    int position = 0;                      // first differing position of the output
    llama_token got = -1;                  // the decode's token there
    std::vector<std::vector<int>> forwards;  // [width, accepted] of the decode's target forwards, the last
                                             // one the forward that committed `position`
};

// The logits of one output row of the model's last forward, copied (the next forward overwrites them).
std::vector<float> row_logits(const Model & m, int row) {
    const float * logits = m.output_logits(row);
    if (logits == nullptr) throw JobError("internal: no logits for row " + std::to_string(row));
    return std::vector<float>(logits, logits + m.n_vocab());
}

// Top-2 (ties keep the lowest id, as Model::argmax) and the logits of the two tokens in question.
json describe_row(const std::vector<float> & l, llama_token expected, llama_token got) {
    int best = 0, second = -1;
    for (int i = 1; i < (int) l.size(); i++) {
        if (l[i] > l[best]) {
            second = best;
            best = i;
        } else if (second < 0 || l[i] > l[second]) {
            second = i;
        }
    }
    return json{{"top", json::array({json::array({best, l[best]}), json::array({second, l[second]})})},
                {"margin", l[best] - l[second]},
                {"expected_logit", l[expected]},
                {"got_logit", l[got]}};
}

// Token j of a forward's input starting at position `from` of y: the reference, its last token past the end
// (rows after the one read are causally masked from it, so what fills them does not change it).
llama_token fill(const std::vector<llama_token> & y, int i) { return y[std::min(i, (int) y.size() - 1)]; }

json explain(Model & target, const Window & w, const Case & c) {
    const std::vector<llama_token> & y = w.reference;
    if (c.position < 1 || c.position >= (int) y.size()) {
        throw JobError("case of window '" + w.id + "': position " + std::to_string(c.position) +
                           " is not within the reference (1.." + std::to_string((int) y.size() - 1) + ")",
                       "position 0 comes from the prefill, which every method shares");
    }
    if (c.got < 0 || c.got >= target.n_vocab()) {
        throw JobError("case of window '" + w.id + "': got " + std::to_string(c.got) + " is not a token id of the target");
    }
    const llama_token expected = y[c.position];
    // The single-token way: exactly greedy_target's forwards up to the position.
    prefill_window(target, nullptr, w);
    for (int t = 1; t <= c.position; t++) target.forward(&y[t - 1], 1, false);
    const std::vector<float> single = row_logits(target, -1);

    // The decode's way: its target forwards, each [y[t-1], y[t..]] at depth n_prompt + t - 1.
    prefill_window(target, nullptr, w);
    const int n_prompt = target.kv_len();
    int t = 1, width = 0, row = -1;
    for (size_t k = 0; k < c.forwards.size(); k++) {
        const std::vector<int> & f = c.forwards[k];
        if (f.size() != 2 || f[0] < 1 || f[1] < 0 || f[1] >= f[0]) {
            throw JobError("case of window '" + w.id + "': forwards[" + std::to_string(k) +
                               "] must be [width >= 1, accepted < width]");
        }
        if (f[0] > target.max_outputs()) {
            throw JobError("case of window '" + w.id + "': forward width " + std::to_string(f[0]) + " above " +
                           std::to_string(target.max_outputs()));
        }
        std::vector<llama_token> tokens(f[0]);
        for (int j = 0; j < f[0]; j++) tokens[j] = fill(y, t - 1 + j);
        target.forward(tokens, true);
        const bool last = k + 1 == c.forwards.size();
        if (last) {
            width = f[0];
            row = c.position - t;
            if (row < 0 || row >= width) {
                throw JobError("case of window '" + w.id + "': the last forward commits positions " +
                                   std::to_string(t) + ".." + std::to_string(t + width - 1) + ", not " +
                                   std::to_string(c.position),
                               "forwards must end with the forward that committed the position");
            }
            break;
        }
        t += f[1] + 1;
        if (t > c.position) {
            throw JobError("case of window '" + w.id + "': forwards[" + std::to_string(k) + "] already commits position " +
                           std::to_string(c.position), "forwards must end with the forward that committed it");
        }
        target.rollback(n_prompt + t - 1);
    }
    if (row < 0) throw JobError("case of window '" + w.id + "': forwards is empty");
    const std::vector<float> batched = row_logits(target, row);
    float max_diff = 0.0f;
    for (size_t i = 0; i < single.size(); i++) max_diff = std::max(max_diff, std::fabs(single[i] - batched[i]));
    return json{{"kind", "divergence_margins"},
                {"window_id", w.id},
                {"position", c.position},
                {"expected", expected},
                {"got", c.got},
                {"width", width},
                {"row", row},
                {"single", describe_row(single, expected, c.got)},
                {"batched", describe_row(batched, expected, c.got)},
                {"max_logit_diff", max_diff}};
}

}  // namespace

void run_divergence(JobObject & job) {
    JobModels models = parse_job_models(job, DrafterNeed::optional);
    if (models.drafter.present) throw JobError("job key 'drafter': the divergence mode runs the target alone");
    std::vector<Window> windows = parse_windows(job, true);
    std::vector<Case> cases;
    int widest = 1;
    for (JobObject & co : job.objects("cases")) {
        Case c;
        c.window_id = co.need<std::string>("window_id");
        c.position = co.need<int>("position");
        c.got = co.need<int>("got");
        c.forwards = co.need<std::vector<std::vector<int>>>("forwards");
        co.done();
        for (const auto & f : c.forwards) widest = std::max(widest, f.empty() ? 1 : f[0]);
        cases.push_back(std::move(c));
    }
    job.done();
    std::map<std::string, const Window *> by_id;
    for (const Window & w : windows) {
        if (w.reference.empty()) throw JobError("window '" + w.id + "' has no reference (the expected output)");
        by_id[w.id] = &w;
    }
    for (const Case & c : cases) {
        if (!by_id.count(c.window_id)) throw JobError("case names window '" + c.window_id + "', which the job lacks");
    }
    ModelLoad load;
    load.target_extra = widest + 8;
    load.target_outputs = widest;
    emit_event("start", {{"mode", "divergence"}, {"cases", cases.size()}});
    LoadedModels loaded = load_models(models, windows, load, false);
    for (const Case & c : cases) emit_result(explain(*loaded.target, *by_id[c.window_id], c));
}
