// The environment policy of child processes: an allowlist, credentials never inherited.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "awp/core/child_env.hpp"

namespace child_env_test {

namespace ce = awp::core::child_env;

namespace {

std::vector<char*> environ_of(std::vector<std::string>& kv) {
    std::vector<char*> out;
    for (auto& s : kv) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace

TEST_CASE("child env: only allowlisted variables are inherited, credentials never", "[core]") {
    ::unsetenv(ce::kAllowVariable);
    std::vector<std::string> parent = {"PATH=/usr/bin:/bin",
                                       "HOME=/home/awp",
                                       "LANG=C.UTF-8",
                                       "LC_ALL=C",
                                       "TZ=UTC",
                                       "OPENCLAW_STATE_DIR=/state",
                                       "JWT_SECRET=jwt",
                                       "SERVICE_ROLE_KEY=svc",
                                       "DATABASE_URL=postgres://u:pw@h/d",
                                       "AWP_API_DATABASE_URL=postgres://x",
                                       "PGPASSWORD=pw",
                                       "HOSTED_SECRETS_KEY=k",
                                       "GATEWAY_KEY=awpk_0_x",
                                       "GATEWAY_KEY_FILE=/etc/awp/gateway.key",
                                       "OPENCLAW_GATEWAY_TOKEN=t",
                                       "GITHUB_TOKEN=g",
                                       "MY_PASSWORD=p",
                                       "AWS_SECRET_ACCESS_KEY=a",
                                       "RANDOM_SETTING=x",
                                       "LD_PRELOAD=/tmp/evil.so",
                                       "NOEQUALS"};
    auto env = environ_of(parent);
    auto out = ce::build({{"AWP_GATEWAY", "gw"}, {"AGENT_SECRET_FOR_ACTION", "given"}}, env.data());
    CHECK(out.at("PATH") == "/usr/bin:/bin");
    CHECK(out.at("HOME") == "/home/awp");
    CHECK(out.count("LC_ALL") == 1);
    CHECK(out.count("TZ") == 1);
    CHECK(out.count("OPENCLAW_STATE_DIR") == 1);
    for (const char* gone :
         {"JWT_SECRET", "SERVICE_ROLE_KEY", "DATABASE_URL", "AWP_API_DATABASE_URL", "PGPASSWORD",
          "HOSTED_SECRETS_KEY", "GATEWAY_KEY", "GATEWAY_KEY_FILE", "OPENCLAW_GATEWAY_TOKEN",
          "GITHUB_TOKEN", "MY_PASSWORD", "AWS_SECRET_ACCESS_KEY", "RANDOM_SETTING", "LD_PRELOAD",
          "NOEQUALS"}) {
        INFO(gone);
        CHECK(out.count(gone) == 0);
    }
    // What the caller sets on purpose is there, whatever its name.
    CHECK(out.at("AWP_GATEWAY") == "gw");
    CHECK(out.at("AGENT_SECRET_FOR_ACTION") == "given");
}

TEST_CASE("child env: AWP_CHILD_ENV_ALLOW adds names and prefixes, never credentials", "[core]") {
    ::setenv(ce::kAllowVariable, "RANDOM_SETTING, TOOL_*,DEPLOY_KEY", 1);
    std::vector<std::string> parent = {"RANDOM_SETTING=x", "TOOL_A=1",          "TOOL_B=2",
                                       "TOOLX=3",          "DEPLOY_KEY=secret", "TOOL_API_KEY=k"};
    auto env = environ_of(parent);
    auto out = ce::build({}, env.data());
    ::unsetenv(ce::kAllowVariable);
    CHECK(out.count("RANDOM_SETTING") == 1);
    CHECK(out.count("TOOL_A") == 1);
    CHECK(out.count("TOOL_B") == 1);
    CHECK(out.count("TOOLX") == 0);
    CHECK(out.count("DEPLOY_KEY") == 0);
    CHECK(out.count("TOOL_API_KEY") == 0);
    CHECK(ce::looks_secret("pgservicefile"));
    CHECK(ce::looks_secret("x_auth_header"));
    CHECK_FALSE(ce::looks_secret("HOME"));
}

TEST_CASE("child env: apply replaces the environment", "[core]") {
    awp::core::process::spawn_options o;
    o.env.emplace(std::string("A"), std::string("1"));
    o.env_unset.emplace_back("B");
    ce::apply(o);
    CHECK(o.replace_env);
    CHECK(o.env_unset.empty());
    CHECK(o.env.at("A") == "1");
}

TEST_CASE("child env: a proxy's password is not inherited unless the operator names the variable",
          "[core]") {
    CHECK(ce::without_url_password("http://user:s3cret@proxy:3128") == "http://user@proxy:3128");
    CHECK(ce::without_url_password("https://u:p@h/x?y=z@w") == "https://u@h/x?y=z@w");
    CHECK(ce::without_url_password("http://proxy:3128") == "http://proxy:3128");
    CHECK(ce::without_url_password("http://user@proxy:3128") == "http://user@proxy:3128");
    CHECK(ce::without_url_password("localhost,127.0.0.1") == "localhost,127.0.0.1");
    std::vector<std::string> parent = {"HTTPS_PROXY=http://awp:s3cret@proxy.internal:3128",
                                       "http_proxy=http://awp:s3cret@proxy.internal:3128",
                                       "NO_PROXY=localhost"};
    ::unsetenv(ce::kAllowVariable);
    auto env = environ_of(parent);
    auto out = ce::build({}, env.data());
    CHECK(out.at("HTTPS_PROXY") == "http://awp@proxy.internal:3128");
    CHECK(out.at("http_proxy") == "http://awp@proxy.internal:3128");
    CHECK(out.at("NO_PROXY") == "localhost");
    // Named on purpose: the runtime needs an authenticated proxy to reach its providers.
    ::setenv(ce::kAllowVariable, "HTTPS_PROXY", 1);
    out = ce::build({}, env.data());
    CHECK(out.at("HTTPS_PROXY") == "http://awp:s3cret@proxy.internal:3128");
    CHECK(out.at("http_proxy") == "http://awp@proxy.internal:3128");
    ::unsetenv(ce::kAllowVariable);
}

// build() without a parent remembers what the process's own environment passes on (a daemon
// spawns a child per command): a setenv, an unsetenv or a new AWP_CHILD_ENV_ALLOW between two
// children is seen by the next one, never a stale copy.
TEST_CASE("child env: the process's own environment is read again after it changes", "[core]") {
    const char* had = std::getenv("LC_ALL");
    const std::string lc_all = had ? had : "";
    ::unsetenv(ce::kAllowVariable);
    ::unsetenv("AWP_TEST_CHILD_SETTING");
    ::setenv("LC_ALL", "C", 1);
    auto out = ce::build({});
    CHECK(out.at("LC_ALL") == "C");
    CHECK(out.count("AWP_TEST_CHILD_SETTING") == 0);
    CHECK(ce::build({}) == out);  // unchanged: the same

    ::setenv("LC_ALL", "C.UTF-8", 1);
    CHECK(ce::build({}).at("LC_ALL") == "C.UTF-8");
    ::setenv("AWP_TEST_CHILD_SETTING", "x", 1);
    CHECK(ce::build({}).count("AWP_TEST_CHILD_SETTING") == 0);  // not on the allowlist
    ::setenv(ce::kAllowVariable, "AWP_TEST_CHILD_SETTING", 1);
    CHECK(ce::build({}).at("AWP_TEST_CHILD_SETTING") == "x");
    ::setenv("AWP_TEST_CHILD_SETTING", "y", 1);
    CHECK(ce::build({}).at("AWP_TEST_CHILD_SETTING") == "y");
    // Back to an earlier value: glibc may hand back the same string it allocated before.
    ::setenv("AWP_TEST_CHILD_SETTING", "x", 1);
    CHECK(ce::build({}).at("AWP_TEST_CHILD_SETTING") == "x");
    ::unsetenv(ce::kAllowVariable);
    CHECK(ce::build({}).count("AWP_TEST_CHILD_SETTING") == 0);
    ::unsetenv("AWP_TEST_CHILD_SETTING");
    ::unsetenv("LC_ALL");
    CHECK(ce::build({}).count("LC_ALL") == 0);
    // What the caller sets wins over what is inherited, and is not remembered.
    ::setenv("LC_ALL", "C", 1);
    CHECK(ce::build({{"LC_ALL", "POSIX"}}).at("LC_ALL") == "POSIX");
    CHECK(ce::build({}).at("LC_ALL") == "C");
    if (had) {
        ::setenv("LC_ALL", lc_all.c_str(), 1);
    } else {
        ::unsetenv("LC_ALL");
    }
}

}  // namespace child_env_test
