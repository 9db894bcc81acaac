// Catch2 entry point shared by the unit, integration and e2e suites.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
