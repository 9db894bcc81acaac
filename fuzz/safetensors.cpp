// safetensors model files (u64 header length, JSON header, tensor data): every offset and size
// is checked when a file is opened. The input is written to a file in /dev/shm and opened.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "awp/embed/error.hpp"
#include "awp/embed/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path =
        "/dev/shm/awp-fuzz-" + std::to_string(::getpid()) + ".safetensors";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    std::size_t off = 0;
    while (off < size) {
        auto n = ::write(fd, data + off, size - off);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
    }
    ::close(fd);
    try {
        awp::embed::safetensors_file f(path);
        (void)f;
    } catch (const awp::embed::error&) {
    }
    return 0;
}
