// Root of the exceptions awp throws, and the configuration error daemons exit 78 on.
#pragma once

#include <stdexcept>
#include <string>

namespace awp::core {

/// Root of every failure awp throws.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Invalid configuration: daemons exit 78 (EX_CONFIG) on it.
class config_error : public error {
public:
    using error::error;
};

}  // namespace awp::core
