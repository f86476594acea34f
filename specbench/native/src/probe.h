// Reference probes (docs/METHODS.md §6.2 Reference probes and paired runs): a short fixed workload timed between a
// job's windows, so that a validation can tell host drift from replay error, and the host's own
// view of how much CPU the job was denied (run-queue wait, VM steal) at that moment.
#pragma once

#include "engine.h"
#include "protocol.h"

#include <string>

struct ProbeOptions {
    bool enabled = false;
    int repetitions = 5;  // timed forwards per model; the probe is their median
};
// Reads the job's optional "probe": {"repetitions": n} (n >= 3).
ProbeOptions parse_probe(JobObject & job);

// Times `repetitions` width-1 forwards of each model at depth 0 (all rows; a lookup drafter,
// `drafter` null with `lookup`, times one lookup over a fixed 128-token context) and emits a
// result {"kind": "probe", "where": where, ...} with both medians, every sample, the job's
// cumulative run-queue wait and steal, and the CPU frequencies where the kernel exposes them.
// Leaves both KV caches empty.
void emit_probe(Model & target, Model * drafter, bool lookup, const ProbeOptions & opts, const std::string & where,
                const json & fields = json::object());
