// specbench-runner: runs one job (JSON from a file argument or stdin) and streams JSON
// lines on stdout. See native/README.md for the protocol and the job formats.
#include "modes.h"
#include "lookup.h"

#include "llama.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#ifndef SPECBENCH_WHISPER_VERSION
#define SPECBENCH_WHISPER_VERSION "unknown"
#define SPECBENCH_WHISPER_EDITS "unknown"
#endif
#ifndef SPECBENCH_LLAMA_COMMIT
#define SPECBENCH_LLAMA_COMMIT "unknown"
#endif

void run_divergence(JobObject & job);  // divergence.cpp

namespace {

const char * RUNNER_VERSION = "0.1.0";
// Bumped whenever a job or output format changes; the Python side checks it.
const int PROTOCOL_VERSION = 1;

const std::map<std::string, void (*)(JobObject &)> & job_modes() {
    static const std::map<std::string, void (*)(JobObject &)> modes = {
        {"sweep", run_sweep},       {"decode", run_decode},         {"trace", run_trace},
        {"tokenize", run_tokenize}, {"detokenize", run_detokenize}, {"cosched", run_cosched},
        {"probe", run_probe},       {"divergence", run_divergence},
    };
    return modes;
}

std::vector<std::string> mode_names() {
    std::vector<std::string> names;
    for (const auto & kv : job_modes()) names.push_back(kv.first);
    return names;
}

// Callers read what the runner can do from here, not by trying jobs (each a process start:
// costly over adb).
// llama.cpp's built-in chat template names (what a job's "template" may name)
std::vector<std::string> chat_templates() {
    std::vector<const char *> names(llama_chat_builtin_templates(nullptr, 0));
    llama_chat_builtin_templates(names.data(), names.size());
    return std::vector<std::string>(names.begin(), names.end());
}

json runner_info() {
    return json{{"runner", "specbench-runner"},
                {"chat_templates", chat_templates()},
                {"version", RUNNER_VERSION},
                {"protocol", PROTOCOL_VERSION},
                {"llama_cpp_commit", SPECBENCH_LLAMA_COMMIT},
                {"whisper_cpp_version", SPECBENCH_WHISPER_VERSION},
                {"whisper_cpp_edits_sha256", SPECBENCH_WHISPER_EDITS},
                {"modes", mode_names()},
                {"methods", decode_methods()},
                {"lookup_drafters", {LOOKUP_NAME}},
                {"system_info", llama_print_system_info()}};
}

std::string read_job_text(int argc, char ** argv) {
    if (argc < 2 || std::strcmp(argv[1], "-") == 0) {
        return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    std::ifstream f(argv[1]);
    if (!f) throw JobError(std::string("cannot read job file ") + argv[1], "pass a JSON file path, or - for stdin");
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void run_job(const json & doc) {
    const auto & modes = job_modes();
    JobObject job(doc, "");
    const std::string mode = job.need<std::string>("mode");
    install_log_filter(job.get<bool>("verbose", false));
    auto it = modes.find(mode);
    if (it == modes.end()) throw JobError("unknown mode '" + mode + "'", "available: " + join_names(mode_names()));
    it->second(job);
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc > 1 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "--info") == 0)) {
        install_log_filter(false);
        llama_backend_init();
        std::puts(runner_info().dump().c_str());
        return 0;
    }
    if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        std::puts("usage: specbench-runner [JOB.json | -]   (job from stdin when omitted)\n"
                  "       specbench-runner --version\n"
                  "Prints one JSON object per line: {\"event\"}, {\"result\"}, or {\"error\", \"hint\"} and exit 1.");
        std::printf("Modes: %s (see native/README.md).\n", join_names(mode_names()).c_str());
        return 0;
    }
    install_log_filter(false);
    llama_backend_init();
    int status = 0;
    try {
        json doc;
        try {
            doc = json::parse(read_job_text(argc, argv));
        } catch (const json::parse_error & e) {
            throw JobError(std::string("job is not valid JSON: ") + e.what());
        }
        emit_event("runner", runner_info());
        const int64_t t0 = now_us();
        run_job(doc);
        emit_event("pinning", pinning_report());
        emit_event("done", {{"wall_s", (now_us() - t0) * 1e-6}});
    } catch (const JobError & e) {
        emit_error(e.what(), e.hint);
        status = 1;
    } catch (const std::exception & e) {
        emit_error(std::string("internal error: ") + e.what(), "please report this with the job file");
        status = 2;
    }
    llama_backend_free();
    return status;
}
