// Loopback helpers for tests that start servers.
#pragma once

namespace awp::test {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, read back, closed).
unsigned short free_port();

}  // namespace awp::test
