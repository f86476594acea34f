// The runner's wire protocol: a job JSON in, one JSON object per line out.
//
//   {"event": ...}            progress (stdout, one line each, flushed at once)
//   {"result": {...}}         one measured record
//   {"error": "...", "hint"}  last line before a non-zero exit
//
// Logs go to stderr, so stdout stays machine-readable.
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

// A problem the caller can fix (bad job, missing file); becomes the {"error"} line.
struct JobError : std::runtime_error {
    std::string hint;
    explicit JobError(const std::string & msg, std::string hint_ = "")
        : std::runtime_error(msg), hint(std::move(hint_)) {}
};

void emit(const json & line);
void emit_event(const std::string & name, json fields = json::object());
void emit_result(const json & record);
void emit_error(const std::string & message, const std::string & hint);

// Reads one JSON object of the job, remembering which keys were read, so that
// done() can reject keys nobody asked for (a typo must not silently become a default).
class JobObject {
  public:
    JobObject(const json & j, std::string path);

    // Every key asked about is "known", present or not: done() lists them in its hint.
    bool has(const std::string & key) {
        used_.insert(key);
        return j_.contains(key);
    }

    template <typename T> T need(const std::string & key) {
        if (!j_.contains(key)) {
            throw JobError("job key '" + full(key) + "' is required", "see native/README.md for the job format");
        }
        return convert<T>(key);
    }

    template <typename T> T get(const std::string & key, T fallback) {
        used_.insert(key);
        return j_.contains(key) ? convert<T>(key) : fallback;
    }

    JobObject object(const std::string & key);           // a required nested object
    std::vector<JobObject> objects(const std::string & key);  // a required non-empty list of objects
    void done() const;                                    // throws on the first unread key
    const std::string & path() const { return path_; }

  private:
    std::string full(const std::string & key) const { return path_.empty() ? key : path_ + "." + key; }

    template <typename T> T convert(const std::string & key) {
        used_.insert(key);
        try {
            return j_.at(key).get<T>();
        } catch (const json::exception &) {
            throw JobError("job key '" + full(key) + "': expected " + type_name<T>() + ", got " +
                           j_.at(key).dump().substr(0, 60));
        }
    }

    template <typename T> static std::string type_name();

    const json & j_;
    std::string path_;
    std::set<std::string> used_;
};

template <> inline std::string JobObject::type_name<int>() { return "an integer"; }
template <> inline std::string JobObject::type_name<double>() { return "a number"; }
template <> inline std::string JobObject::type_name<bool>() { return "true or false"; }
template <> inline std::string JobObject::type_name<std::string>() { return "a string"; }
template <> inline std::string JobObject::type_name<std::vector<int>>() { return "a list of integers"; }
template <> inline std::string JobObject::type_name<std::vector<std::string>>() { return "a list of strings"; }
template <> inline std::string JobObject::type_name<std::vector<std::vector<int>>>() { return "a list of integer lists"; }
