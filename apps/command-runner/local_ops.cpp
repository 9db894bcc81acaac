// In-process actions on the agent's files: upload_file (atomic, no symlink followed). The
// runtime's own files are changed through its CLI or under its lock (awp::runtime).
#include "local_ops.hpp"

#include <filesystem>

#include "secrets.hpp"

namespace awp::runner {

namespace fs = std::filesystem;

std::string upload_file(const std::string& dir, const std::string& path, const std::string& content,
                        const std::string& mode) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw local_op_error("the agent's workspace does not exist on this gateway");
    const fs::path target = fs::path(dir) / path;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw local_op_error("cannot create the folder of " + path + ": " + ec.message());
    // No symlink may lead out of the workspace.
    const fs::path base = fs::canonical(dir);
    const fs::path parent = fs::canonical(target.parent_path(), ec);
    const auto rel = parent.lexically_relative(base);
    if (ec || rel.empty() || *rel.begin() == "..")
        throw local_op_error("path leaves the agent's workspace");
    if (fs::is_symlink(target, ec)) throw local_op_error("path is a symbolic link");
    write_file_atomic(target.string(), content,
                      static_cast<unsigned>(std::stoul(mode, nullptr, 8)));
    return "Wrote " + std::to_string(content.size()) + " bytes to " + path;
}

}  // namespace awp::runner
