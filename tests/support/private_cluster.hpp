// A Postgres server of a test's own (initdb in a temp folder, its own port), for tests that
// stop, restart or kill the server without disturbing the tests running beside them.
#pragma once

#include <filesystem>
#include <string>

namespace awp::test {

class private_cluster {
public:
    /// initdb and start; with_schema applies the migrations (awpctl migrate) to database awp.
    explicit private_cluster(bool with_schema = false);
    ~private_cluster();
    private_cluster(const private_cluster&) = delete;
    private_cluster& operator=(const private_cluster&) = delete;

    int port() const noexcept { return port_; }
    /// Superuser DSN over TCP on 127.0.0.1 (trust auth: the cluster lives only for the test).
    std::string dsn(const std::string& dbname = "awp") const;

    void start();
    /// Fast shutdown (connections are terminated, as in a real restart).
    void stop();
    void restart() {
        stop();
        start();
    }
    /// SIGKILL the postmaster: a crash, not a shutdown.
    void kill9();

private:
    void as_server(const std::string& cmd) const;
    std::filesystem::path dir_;
    int port_ = 0;
};

}  // namespace awp::test
