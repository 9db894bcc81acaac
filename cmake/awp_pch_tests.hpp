// The test suites' precompiled header (AWP_PCH): the daemons' common headers and Catch2's, which
// every test file includes (102 of them) and whose parsing was a large share of each one's time.
#include "awp_pch.hpp"

#include <catch2/catch.hpp>
