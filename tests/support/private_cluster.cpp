// A throwaway Postgres per test, run as the postgres OS user when we are root.
#include "support/private_cluster.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "support/net.hpp"
#include "support/test_db.hpp"

namespace awp::test {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin";

void run(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("command failed: " + cmd);
}

}  // namespace

private_cluster::private_cluster(bool with_schema) : port_(free_port()) {
    dir_ = fs::temp_directory_path() / random_name("awp-pg-");
    fs::create_directories(dir_);
    if (geteuid() == 0) run("chown postgres: " + dir_.string());
    as_server(std::string(kPgBin) + "/initdb -D " + (dir_ / "data").string() +
              " -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null");
    std::ofstream conf(dir_ / "data" / "postgresql.conf", std::ios::app);
    conf << "port = " << port_ << "\nlisten_addresses = '127.0.0.1'\n"
         << "unix_socket_directories = '" << dir_.string() << "'\n"
         << "fsync = off\nshared_buffers = 32MB\nmax_connections = 50\n";
    conf.close();
    start();
    run("psql -X -q -d '" + dsn("postgres") + "' -c 'CREATE DATABASE awp' >/dev/null");
    if (with_schema) {
        run(std::string(AWP_BIN_DIR) + "/awpctl --database-url '" + dsn() + "' migrate >/dev/null");
    }
}

private_cluster::~private_cluster() {
    try {
        as_server(std::string(kPgBin) + "/pg_ctl -D " + (dir_ / "data").string() +
                  " -m immediate -w stop >/dev/null 2>&1 || true");
    } catch (...) {
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::string private_cluster::dsn(const std::string& dbname) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + dbname +
           " connect_timeout=5";
}

void private_cluster::as_server(const std::string& cmd) const {
    run(geteuid() == 0 ? "runuser -u postgres -- sh -c '" + cmd + "'" : cmd);
}

void private_cluster::start() {
    as_server(std::string(kPgBin) + "/pg_ctl -D " + (dir_ / "data").string() + " -l " +
              (dir_ / "log").string() + " -w -t 60 start >/dev/null");
}

void private_cluster::stop() {
    as_server(std::string(kPgBin) + "/pg_ctl -D " + (dir_ / "data").string() +
              " -m fast -w -t 60 stop >/dev/null");
}

void private_cluster::kill9() {
    std::ifstream pid_file(dir_ / "data" / "postmaster.pid");
    int pid = 0;
    pid_file >> pid;
    if (pid > 0) ::kill(pid, SIGKILL);
    // Backends notice the postmaster is gone and exit; wait until the port is free.
    for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) ::usleep(50'000);
    std::error_code ec;
    fs::remove(dir_ / "data" / "postmaster.pid", ec);
}

}  // namespace awp::test
