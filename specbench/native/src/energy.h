// The battery sampler of a decode job's "energy" key: a thread reads current and voltage every
// interval on the decode timing's clock (now_us: CLOCK_MONOTONIC), so each sample falls in one
// decode's [start_us, end_us] or in the idle period (docs/METHODS.md §10 Energy).
#pragma once

#include "protocol.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct EnergyOptions {
    bool on = false;  // the job has an "energy" key
    std::string current = "/sys/class/power_supply/battery/current_now";
    std::string voltage = "/sys/class/power_supply/battery/voltage_now";
    std::string status = "/sys/class/power_supply/battery/status";
    int interval_ms = 100;  // between samples
    int idle_ms = 0;        // idle period measured before the first window
};

// The "energy" object of a job, range-checked; off when the job has none.
EnergyOptions parse_energy(JobObject & job);

class EnergySampler {
  public:
    // Starts sampling when the files can be read; else emits one "energy" event saying which
    // file is missing, and samples nothing.
    explicit EnergySampler(const EnergyOptions & opts);
    ~EnergySampler();
    EnergySampler(const EnergySampler &) = delete;
    EnergySampler & operator=(const EnergySampler &) = delete;

    bool active() const { return thread_.joinable(); }
    // The calling thread sleeps idle_ms (the job's other threads are idle too) and reports the
    // period as {"kind": "energy_idle", "start_us", "end_us"}.
    void idle();
    // The samples taken since the last flush as one {"kind": "energy"} result line.
    void flush();

  private:
    void loop();
    void sample();  // one reading of current and voltage, timestamped

    EnergyOptions opts_;
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<std::vector<int64_t>> samples_;  // [t_us, current, voltage], raw as the files show them
    std::string status_;
    bool ok_ = false;  // the files could be read at the start
    std::thread thread_;
};
