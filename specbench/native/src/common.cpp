#include "modes.h"
#include "audio.h"
#include "vocabmap.h"

#include <algorithm>
#include <exception>
#include <thread>

CommonOptions parse_common(JobObject & job) {
    CommonOptions o;
    unsigned hw = std::thread::hardware_concurrency();
    o.threads = job.get<int>("threads", hw > 0 ? (int) hw : 4);
    o.n_ctx = job.get<int>("n_ctx", 0);
    if (o.threads < 1) throw JobError("job key 'threads' must be >= 1");
    if (o.n_ctx < 0) throw JobError("job key 'n_ctx' must be >= 0 (0: sized from the job)");
    return o;
}

JobModels parse_job_models(JobObject & job, DrafterNeed need) {
    JobModels m;
    m.common = parse_common(job);
    m.target = parse_model_spec(job.object("target"), "target", m.common.threads);
    if (need == DrafterNeed::model) {
        m.drafter.present = true;
        m.drafter.spec = parse_model_spec(job.object("drafter"), "drafter", m.common.threads);
        return m;
    }
    m.drafter = parse_drafter(job, m.common.threads);
    if (need == DrafterNeed::required && !m.drafter.present) {
        throw JobError("job key 'drafter' is required", "a model {\"path\": ...} or {\"lookup\": \"pld\"}");
    }
    return m;
}

std::string join_names(const std::vector<std::string> & names) {
    std::string joined;
    for (const std::string & name : names) joined += (joined.empty() ? "" : ", ") + name;
    return joined;
}

std::vector<Window> parse_windows(JobObject & job, bool allow_reference) {
    std::vector<Window> windows;
    for (JobObject & wo : job.objects("windows")) {
        Window w;
        w.id = wo.get<std::string>("id", std::to_string(windows.size()));
        if (wo.has("audio")) {
            // An audio window: samples in a file, prompt texts around the <__media__> marker.
            JobObject ao = wo.object("audio");
            w.audio_path = ao.need<std::string>("path");
            w.audio_format = ao.get<std::string>("format", "f32");
            ao.done();
            if (w.audio_format != "f32" && w.audio_format != "s16") {
                throw JobError("window '" + w.id + "': audio.format '" + w.audio_format + "'", "expected \"f32\" or \"s16\"");
            }
            if (w.audio_path.empty()) throw JobError("window '" + w.id + "': audio.path is empty");
            w.prompt_text = wo.need<std::string>("prompt_text");
            w.drafter_prompt_text = wo.get<std::string>("drafter_prompt_text", w.prompt_text);
            if (wo.has("prompt") || wo.has("drafter_prompt")) {
                throw JobError("window '" + w.id + "': an audio window takes prompt_text, not prompt token ids",
                               "tokens of an audio prompt come from libmtmd (the mmproj)");
            }
        } else {
            w.prompt = wo.need<std::vector<int>>("prompt");
            w.drafter_prompt = wo.get<std::vector<int>>("drafter_prompt", w.prompt);
            w.input = wo.get<std::vector<int>>("input", {});
        }
        w.cap = wo.need<int>("cap");
        if (allow_reference) w.reference = wo.get<std::vector<int>>("reference", {});
        wo.done();
        if (!w.is_audio() && (w.prompt.empty() || w.drafter_prompt.empty())) {
            throw JobError("window '" + w.id + "': empty prompt", "a prompt needs at least one token (BOS)");
        }
        if (w.cap < 1) throw JobError("window '" + w.id + "': cap must be >= 1");
        windows.push_back(std::move(w));
    }
    return windows;
}

int size_context(const std::vector<Window> & windows, int extra, bool drafter) {
    size_t need = 0;
    for (const Window & w : windows) {
        need = std::max(need, (drafter ? w.drafter_prompt.size() : w.prompt.size()) + w.cap + extra);
    }
    return (int) ((need + 255) / 256 * 256);
}

int max_cap(const std::vector<Window> & windows) {
    int cap = 0;
    for (const Window & w : windows) cap = std::max(cap, w.cap);
    return cap;
}

json op_json(const Op & op) {
    json j = {{"model", op.model}, {"width", op.width}, {"depth", op.depth}};
    if (op.accepted >= 0) j["accepted"] = op.accepted;
    j["us"] = op.us;
    if (op.extra.is_object()) j.update(op.extra);
    return j;
}

Op forward_op(const char * model, const Model & m, int width, int depth, int accepted, int64_t us, json extra) {
    Op op{model, width, depth, accepted, us, std::move(extra)};
    op.start_us = m.last_forward_start_us();
    return op;
}

void stamp_ops(std::vector<Op> & ops, int64_t clock_start) {
    for (Op & op : ops) {
        if (op.start_us < 0) continue;
        if (!op.extra.is_object()) op.extra = json::object();
        op.extra["t_us"] = op.start_us - clock_start;
    }
}

int verify_round(Model & target, std::vector<llama_token> & y, const std::vector<llama_token> & c, const Window & w,
                 std::vector<Op> & ops, json extra) {
    std::vector<llama_token> batch = {y.back()};
    batch.insert(batch.end(), c.begin(), c.end());
    const int depth = target.kv_len();
    const int64_t us = target.forward(batch, true);
    int a = 0;
    bool ended = false;
    while (a < (int) c.size() && c[a] == target.argmax(a)) {
        y.push_back(c[a++]);
        if (target.is_eog(y.back())) {
            ended = true;
            break;
        }
    }
    if (!ended && (int) y.size() < w.cap) y.push_back(target.argmax(a));
    ops.push_back(forward_op("target", target, (int) batch.size(), depth, a, us, std::move(extra)));
    target.rollback((int) w.prompt.size() + (int) y.size() - 1);
    return a;
}

std::unique_ptr<Model> load_model(const ModelSpec & spec, int n_ctx, int n_batch, int max_outputs) {
    auto m = open_model(spec, n_ctx, n_batch, max_outputs);
    emit_event("loaded", m->describe());
    return m;
}

LoadedModels load_models(const JobModels & job, std::vector<Window> & windows, const ModelLoad & load,
                         bool with_drafter) {
    const bool sized = job.common.n_ctx == 0;  // contexts sized from the windows
    if (with_drafter) require_same_format(job.target, job.drafter.spec);  // told by magic, before loading
    LoadedModels m;
    m.target = load_model(job.target, sized ? size_context(windows, load.target_extra, false) : job.common.n_ctx, 512,
                          load.target_outputs);
    attach_audio(*m.target, windows, false, load.target_extra, sized);
    if (!with_drafter) return m;
    m.drafter = load_model(job.drafter.spec, sized ? size_context(windows, load.drafter_extra, true) : job.common.n_ctx,
                           512, load.drafter_outputs);
    attach_audio(*m.drafter, windows, true, load.drafter_extra, sized);
    const std::string difference = vocab_difference(*m.target, *m.drafter);
    m.cross = !difference.empty();
    if (!m.cross) return m;
    check_mappable(*m.target, *m.drafter);
    if (!load.same_vocab_for.empty()) {
        throw JobError(load.same_vocab_for + " needs a same-vocabulary drafter; the drafter (" + m.drafter->path() +
                           ") and the target (" + m.target->path() + ") differ (" + difference + ")",
                       load.same_vocab_hint);
    }
    if (sized) m.drafter->resize_context(size_context(windows, 3 * max_cap(windows) + load.cross_extra, true));
    return m;
}

void refuse_audio_for_lookup(const Window & w) {
    if (w.is_audio()) {
        throw JobError("window '" + w.id + "': the lookup drafter " + LOOKUP_NAME +
                       " reads prompt token ids; an audio prompt has embeddings");
    }
}

bool lanes_apart(const Model & a, const Model & b) {
    if (a.cpus().empty() || b.cpus().empty()) return false;
    for (int c : a.cpus()) {
        if (std::find(b.cpus().begin(), b.cpus().end(), c) != b.cpus().end()) return false;
    }
    return true;
}

void encode_window_ahead(Model & target, Model * drafter, const Window & w) {
    if (!w.pcm || !drafter || !target.hears_audio() || !drafter->hears_audio() || !lanes_apart(target, *drafter)) {
        return;
    }
    std::exception_ptr failed;
    std::thread lane([&] {  // pins itself to the drafter's lane on encoding
        try {
            drafter->encode_audio_ahead(*w.pcm);
        } catch (...) {
            failed = std::current_exception();
        }
    });
    try {
        target.encode_audio_ahead(*w.pcm);
    } catch (...) {
        lane.join();
        throw;
    }
    lane.join();
    if (failed) std::rethrow_exception(failed);
}

Prefill prefill_window(Model & target, Model * drafter, const Window & w) {
    Prefill p;
    p.audio_us = prefill_background(target, w, false).audio_us;
    p.audio_reused = target.audio_prefill_reused();
    if (drafter) {
        p.audio_us += prefill_background(*drafter, w, true).audio_us;
        p.audio_reused = p.audio_reused || drafter->audio_prefill_reused();
    }
    const int64_t request = now_us();  // the request instant: the audio is in, the instruction known
    const int64_t t_us = prefill_instruction(target, w, false);
    p.first_token_us = now_us() - request;
    p.instruction_us = t_us;
    if (drafter) {
        p.instruction_us += prefill_instruction(*drafter, w, true);
        p.first_draft_us = now_us() - request;
    }
    return p;
}

json prefill_json(const Prefill & p, const Window & w, int64_t decode_us, bool with_drafter) {
    json j = {{"audio_prefill_us", p.audio_us},
              {"instruction_prefill_us", p.instruction_us},
              {"first_token_us", p.first_token_us}};
    if (with_drafter) j["first_draft_us"] = p.first_draft_us;
    if (p.audio_reused) j["audio_prefill_reused"] = true;  // audio_prefill_us leaves out a kept encoder output
    // The request clock: request instant -> last commit (all residual prefills + the decode).
    j["request_latency_us"] = (with_drafter ? p.first_draft_us : p.first_token_us) + decode_us;
    j["n_audio"] = media_tokens(w, false);
    if (with_drafter) j["n_audio_drafter"] = media_tokens(w, true);
    return j;
}

GreedyRun greedy_target(Model & target, const Window & w, bool with_margins) {
    GreedyRun run;
    run.prefill = prefill_window(target, nullptr, w);
    run.prefill_us = run.prefill.total_us();
    const int64_t start = now_us();
    auto commit = [&]() {
        if (with_margins) {
            const Top1 top = target.top1(-1);
            run.y.push_back(top.token);
            run.margin.push_back(top.margin);
        } else {
            run.y.push_back(target.argmax(-1));
        }
    };
    commit();
    while (!target.is_eog(run.y.back()) && (int) run.y.size() < w.cap) {
        const int depth = target.kv_len();
        const int64_t us = target.forward(&run.y.back(), 1, false);
        run.ops.push_back(forward_op("target", target, 1, depth, 0, us));
        commit();
    }
    run.decode_us = now_us() - start;
    stamp_ops(run.ops, start);
    run.stop_reason = target.is_eog(run.y.back()) ? "eos" : "cap";
    return run;
}
