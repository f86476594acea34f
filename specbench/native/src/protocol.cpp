#include "protocol.h"

#include <cstdio>

void emit(const json & line) {
    // error_handler::replace: a token piece with broken UTF-8 must not abort the run.
    std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace);
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);  // a reader streaming our stdout sees each line as it happens
}

void emit_event(const std::string & name, json fields) {
    json line = {{"event", name}};
    line.update(fields);
    emit(line);
}

void emit_result(const json & record) { emit(json{{"result", record}}); }

void emit_error(const std::string & message, const std::string & hint) {
    emit(json{{"error", message}, {"hint", hint.empty() ? json(nullptr) : json(hint)}});
}

JobObject::JobObject(const json & j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) {
        throw JobError("job" + (path_.empty() ? std::string() : " key '" + path_ + "'") + ": expected an object, got " +
                       j_.dump().substr(0, 60));
    }
}

JobObject JobObject::object(const std::string & key) {
    if (!j_.contains(key)) {
        throw JobError("job key '" + full(key) + "' is required", "see native/README.md for the job format");
    }
    used_.insert(key);
    return JobObject(j_.at(key), full(key));
}

std::vector<JobObject> JobObject::objects(const std::string & key) {
    if (!j_.contains(key)) {
        throw JobError("job key '" + full(key) + "' is required", "see native/README.md for the job format");
    }
    used_.insert(key);
    const json & list = j_.at(key);
    if (!list.is_array() || list.empty()) {
        throw JobError("job key '" + full(key) + "': expected a non-empty list of objects");
    }
    std::vector<JobObject> out;
    for (size_t i = 0; i < list.size(); i++) {
        out.emplace_back(list[i], full(key) + "[" + std::to_string(i) + "]");
    }
    return out;
}

void JobObject::done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
        if (!used_.count(it.key())) {
            std::string known;
            for (const auto & k : used_) known += (known.empty() ? "" : ", ") + k;
            throw JobError("unknown job key '" + full(it.key()) + "'",
                           "known keys: " + (known.empty() ? std::string("(none)") : known) +
                               "; see native/README.md");
        }
    }
}
