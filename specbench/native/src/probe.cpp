// Reference probes: see probe.h.
#include "probe.h"

#include "modes.h"
#include "timing.h"

#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace {

std::vector<double> time_forwards(Model & m, int repetitions) {
    const llama_token token = 1;
    m.clear();
    m.forward(&token, 1, true);  // untimed: the first forward after other work pays its cache misses
    m.clear();
    std::vector<double> us;
    for (int i = 0; i < repetitions; i++) {
        us.push_back((double) m.forward(&token, 1, true));
        m.clear();
    }
    return us;
}

std::vector<double> time_lookups(int repetitions) {
    std::mt19937 rng(7);
    const std::vector<llama_token> ctx = random_tokens(rng, 32000, 128);
    std::vector<double> us;
    for (int i = 0; i < repetitions; i++) us.push_back(lookup_sample_us(ctx));
    return us;
}

// Sum over this process's threads of the time they waited on a run queue (schedstat's second
// field, ns), in microseconds; -1 where the kernel has no schedstat.
int64_t run_queue_wait_us() {
    DIR * dir = opendir("/proc/self/task");
    if (!dir) return -1;
    int64_t total = 0;
    bool any = false;
    while (dirent * e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/schedstat");
        long long run = 0, wait = 0;
        if (f >> run >> wait) {
            total += wait / 1000;
            any = true;
        }
    }
    closedir(dir);
    return any ? total : -1;
}

// The "steal" column of /proc/stat's cpu line (ticks a hypervisor ran something else); -1 if absent.
int64_t steal_ticks() {
    std::ifstream f("/proc/stat");
    std::string line;
    if (!std::getline(f, line) || line.rfind("cpu ", 0) != 0) return -1;
    std::istringstream in(line.substr(4));
    std::vector<long long> v;
    long long x;
    while (in >> x) v.push_back(x);
    return v.size() > 7 ? v[7] : -1;
}

// scaling_cur_freq (kHz) of every CPU that has one, in CPU order.
json cpu_khz() {
    json out = json::array();
    for (int cpu = 0; cpu < 64; cpu++) {
        std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_cur_freq");
        long long khz = 0;
        if (!(f >> khz)) break;
        out.push_back(khz);
    }
    return out;
}

}  // namespace

ProbeOptions parse_probe(JobObject & job) {
    ProbeOptions opts;
    if (!job.has("probe")) return opts;
    JobObject po = job.object("probe");
    opts.enabled = true;
    opts.repetitions = po.get<int>("repetitions", 5);
    po.done();
    if (opts.repetitions < 3) throw JobError(po.path() + ".repetitions must be >= 3 (a probe is a median)");
    return opts;
}

void emit_probe(Model & target, Model * drafter, bool lookup, const ProbeOptions & opts, const std::string & where,
                const json & fields) {
    if (!opts.enabled) return;
    const std::vector<double> t = time_forwards(target, opts.repetitions);
    json rec = {{"kind", "probe"}, {"where", where}, {"target_us", summarize(t).median}, {"target_samples_us", t}};
    if (drafter || lookup) {
        const std::vector<double> d = drafter ? time_forwards(*drafter, opts.repetitions) : time_lookups(opts.repetitions);
        rec.update({{"drafter_us", summarize(d).median}, {"drafter_samples_us", d}});
    }
    rec.update({{"run_queue_wait_us", run_queue_wait_us()}, {"steal_ticks", steal_ticks()}, {"cpu_khz", cpu_khz()},
                {"t_us", now_us()}});
    rec.update(fields);
    emit_result(rec);
}

// "probe": load the target (and drafter) in their lanes and emit `count` probes, "where" named
// by the job (a validation probes before and after each profile refresh this way).
void run_probe(JobObject & job) {
    const JobModels models = parse_job_models(job, DrafterNeed::optional);
    const DrafterChoice & choice = models.drafter;
    ProbeOptions probe = parse_probe(job);
    const int count = job.get<int>("count", 1);
    const std::string where = job.get<std::string>("where", "probe");
    job.done();
    if (count < 1) throw JobError("job key 'count' must be >= 1");
    probe.enabled = true;
    emit_event("start", {{"mode", "probe"}});
    auto target = load_model(models.target, 256, 512, 1);
    std::unique_ptr<Model> drafter;
    if (choice.present && !choice.lookup) drafter = load_model(choice.spec, 256, 512, 1);
    for (int i = 0; i < count; i++) emit_probe(*target, drafter.get(), choice.lookup, probe, where, {{"index", i}});
}
