// The environment-policy tests (issue 18): a daemon runs with credentials of every kind in its
// environment; whatever the stand-in runtime recorded of its own environment and
// /proc/self/status must hold none of them.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace awp::test {

/// Variables a daemon is started with that a child must never see: the platform's keys, a
/// database password, anything named *_KEY / *_SECRET / *_PASSWORD / *_TOKEN. Values are unique
/// per call so a match cannot come from elsewhere.
std::map<std::string, std::string> daemon_secrets();

/// Every value of `secrets` (and the password inside `dsn`, when given) that occurs in a file
/// under `dir` whose name contains one of `patterns`; how many files were scanned goes to
/// `scanned`.
std::vector<std::string> leaked_secrets(const std::filesystem::path& dir,
                                        const std::vector<std::string>& patterns,
                                        const std::map<std::string, std::string>& secrets,
                                        const std::string& dsn, int* scanned = nullptr);

}  // namespace awp::test
