// A runtime for the dispatcher and runner benchmarks that exits at once; when BENCH_STAMP_DIR is
// set it first writes the wall-clock time it started (ns) to BENCH_STAMP_DIR/<AWP_INBOX_ITEM_ID>.
// `--version` answers like a supported openclaw (the daemons check it at start).
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--version") {
        std::puts("OpenClaw 2026.6.1 (awp bench stand-in)");
        return 0;
    }
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const char* dir = std::getenv("BENCH_STAMP_DIR");
    const char* item = std::getenv("AWP_INBOX_ITEM_ID");
    if (!dir || !item) return 0;
    const std::string path = std::string(dir) + "/" + item;
    const std::string tmp = path + ".tmp";
    char buf[32];
    const int n = std::snprintf(buf, sizeof buf, "%lld",
                                static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    const bool ok = ::write(fd, buf, static_cast<std::size_t>(n)) == n;
    ::close(fd);
    return ok && ::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : 1;
}
