// A daemon under test as a real child process: started from argv, stderr to a file, signalled,
// waited for with a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace awp::test {

class child {
public:
    /// Starts argv[0] with extra environment variables; stderr (the JSON log) goes to a file.
    child(std::vector<std::string> argv, std::map<std::string, std::string> env = {});
    ~child();  // SIGKILLs a child still running
    child(const child&) = delete;
    child& operator=(const child&) = delete;

    pid_t pid() const noexcept { return pid_; }
    void signal(int sig) const;
    /// Exit code (or 128 + signal) once it ends, nullopt if still running after `timeout`.
    std::optional<int> wait(std::chrono::milliseconds timeout);
    bool running();
    /// Everything the child wrote to stderr so far.
    std::string log() const;
    /// Polls the log until it contains `text`; false after the timeout.
    bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout) const;

private:
    pid_t pid_ = -1;
    std::optional<int> status_;
    std::string log_path_;
};

}  // namespace awp::test
