#include "energy.h"
#include "engine.h"

#include <chrono>
#include <fstream>
#include <utility>

namespace {

// The first whitespace-separated word of a sysfs file, or "" when it cannot be read.
std::string read_word(const std::string & path) {
    std::ifstream f(path);
    std::string word;
    if (!(f >> word)) return "";
    return word;
}

bool read_integer(const std::string & path, int64_t & value) {
    const std::string word = read_word(path);
    if (word.empty()) return false;
    try {
        size_t used = 0;
        value = std::stoll(word, &used);
        return used == word.size();
    } catch (const std::exception &) {
        return false;
    }
}

}  // namespace

EnergyOptions parse_energy(JobObject & job) {
    EnergyOptions opts;
    if (!job.has("energy")) return opts;
    JobObject eo = job.object("energy");
    opts.on = true;
    opts.current = eo.get<std::string>("current", opts.current);
    opts.voltage = eo.get<std::string>("voltage", opts.voltage);
    opts.status = eo.get<std::string>("status", opts.status);
    opts.interval_ms = eo.get<int>("interval_ms", opts.interval_ms);
    opts.idle_ms = eo.get<int>("idle_ms", opts.idle_ms);
    eo.done();
    if (opts.interval_ms < 1 || opts.interval_ms > 60000) {
        throw JobError("job key 'energy.interval_ms' must be in 1..60000, got " + std::to_string(opts.interval_ms));
    }
    if (opts.idle_ms < 0 || opts.idle_ms > 600000) {
        throw JobError("job key 'energy.idle_ms' must be in 0..600000, got " + std::to_string(opts.idle_ms));
    }
    return opts;
}

EnergySampler::EnergySampler(const EnergyOptions & opts) : opts_(opts) {
    if (!opts_.on) return;
    int64_t value = 0;
    for (const auto & [key, path] : {std::pair<std::string, std::string>{"current", opts_.current},
                                     std::pair<std::string, std::string>{"voltage", opts_.voltage}}) {
        if (!read_integer(path, value)) {
            // a file that holds something other than an integer is a bad path, not a missing battery
            const std::string word = read_word(path);
            json event = {{"source", nullptr}, {"key", key}, {"missing", path}};
            if (!word.empty()) event["value"] = word;
            emit_event("energy", event);
            return;
        }
    }
    ok_ = true;
    status_ = read_word(opts_.status);
    emit_event("energy", {{"source", {{"current", opts_.current}, {"voltage", opts_.voltage},
                                      {"status", opts_.status}}},
                          {"interval_ms", opts_.interval_ms}, {"status", status_}});
    sample();  // before the idle period starts, so that it opens on a reading
    thread_ = std::thread([this] { loop(); });
}

EnergySampler::~EnergySampler() {
    if (!active()) return;
    stop_ = true;
    thread_.join();
    sample();  // one reading at the end: the last decode's hold ends at a sample, not at a guess
    flush();
}

void EnergySampler::sample() {
    int64_t current = 0, voltage = 0;
    const int64_t t = now_us();
    if (read_integer(opts_.current, current) && read_integer(opts_.voltage, voltage)) {
        std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back({t, current, voltage});
    }
}

void EnergySampler::loop() {
    auto next = std::chrono::steady_clock::now();
    while (true) {
        // a fixed schedule, so a slow read does not stretch every later interval
        next += std::chrono::milliseconds(opts_.interval_ms);
        std::this_thread::sleep_until(next);
        if (stop_) break;
        sample();
    }
}

void EnergySampler::idle() {
    if (!active() || opts_.idle_ms == 0) return;
    const int64_t start = now_us();
    std::this_thread::sleep_for(std::chrono::milliseconds(opts_.idle_ms));
    emit_result({{"kind", "energy_idle"}, {"start_us", start}, {"end_us", now_us()}});
}

void EnergySampler::flush() {
    if (!opts_.on || !ok_) return;
    std::vector<std::vector<int64_t>> batch;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        batch.swap(samples_);
    }
    const std::string status = read_word(opts_.status);
    if (!status.empty()) status_ = status;
    emit_result({{"kind", "energy"}, {"columns", {"t_us", "current", "voltage"}}, {"status", status_},
                 {"samples", batch}});
}
