// Actions done in-process on the agent's files: upload_file.
#pragma once

#include <string>

#include "awp/core/error.hpp"

namespace awp::runner {

class local_op_error : public core::error {
public:
    using core::error::error;
};

/// Writes `content` to <dir>/<path> (dir must exist: the agent's workspace), creating
/// sub-folders, atomically, with the octal `mode`. Returns a summary.
std::string upload_file(const std::string& dir, const std::string& path, const std::string& content,
                        const std::string& mode);

}  // namespace awp::runner
