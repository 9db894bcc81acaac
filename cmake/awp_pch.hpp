// The headers that nearly every awp unit parses, compiled once per build (AWP_PCH,
// cmake/AwpBuild.cmake): the standard library's common headers, Boost.Asio's coroutine core
// (built separately, BOOST_ASIO_SEPARATE_COMPILATION, so these are declarations) and RapidJSON.
// Parsing them was most of a small unit's compile time (the runner's 18-line main.cpp: 10.5 s).
// Only third-party and standard headers belong here: an awp header in it would rebuild every
// unit whenever it changes.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
