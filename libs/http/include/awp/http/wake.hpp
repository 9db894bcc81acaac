// A queue daemon's wake-up source from its options (WAKE_URL, WAKE_DATABASE_URL, WAKE_CA_FILE):
// direct LISTEN, or a stream from the awp-wake relay over HTTP(S) (docs/protocols/wake-relay.md).
// The protocol of the stream is core::wake's and core::listener's; this is its transport.
#pragma once

#include <string>

#include "awp/core/daemon.hpp"
#include "awp/core/notify.hpp"

namespace awp::http {

/// Opens `GET /v1/wake` on `wake_url` with HTTP Basic credentials `login` (a gateway's own
/// Postgres login: the relay checks it by logging in with it) and returns the stream once the
/// answer is 200. With `gateway_key` (a pool login's host, GATEWAY_KEY) the request carries it
/// in the Awp-Gateway-Key header and the relay checks the login with that key presented.
/// Refusals throw upstream_error with the relay's status.
core::relay_opener relay_opener(std::string wake_url, core::pg::login login, std::string ca_file,
                                std::string gateway_key = {});

/// Fills a queue's wake-up options: LISTEN on WAKE_DATABASE_URL (else `database_url`), or, with
/// WAKE_URL, the relay's stream with the login of `database_url`. Throws config_error when
/// WAKE_URL is not an http(s) URL or `database_url` names no user.
void use_wake_source(core::listener_options& listen, const core::daemon::wake_options& wake,
                     const std::string& database_url);

}  // namespace awp::http
