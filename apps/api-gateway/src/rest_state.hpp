// The data API's state in the gateway: the schema cache now in use (swapped whole on a reload)
// and the LISTEN that reloads it on `NOTIFY pgrst, 'reload schema'` (rest.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "awp/core/notify.hpp"
#include "awp/rest/schema.hpp"

namespace awp::api {

struct rest_state {
    std::mutex mu;
    std::shared_ptr<const rest::schema_cache> cache;  // null until the first load
    std::uint64_t loads = 0;
    std::unique_ptr<core::listener> listener;
};

}  // namespace awp::api
