// The exception awp::embed throws: a model folder or file that cannot be used, and why.
#pragma once

#include <awp/core/error.hpp>

namespace awp::embed {

/// Everything this library throws is about files the operator provides (a model folder), so it is
/// a configuration error: daemons exit 78 on it. Messages name the file and the problem.
class error : public core::config_error {
public:
    using core::config_error::config_error;
};

}  // namespace awp::embed
