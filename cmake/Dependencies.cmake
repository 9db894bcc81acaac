# Third-party packages, all from Debian bookworm (scripts/install-deps.sh installs them).
# Imported targets keep their headers SYSTEM, so -Werror judges only our code.
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED CONFIG)
find_package(PostgreSQL REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(OpenSSL 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(JWT REQUIRED IMPORTED_TARGET libjwt)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)

find_package(RapidJSON CONFIG REQUIRED)
if(NOT TARGET RapidJSON::RapidJSON)
  add_library(RapidJSON::RapidJSON INTERFACE IMPORTED)
  set_target_properties(RapidJSON::RapidJSON PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${RAPIDJSON_INCLUDE_DIRS}"
    INTERFACE_COMPILE_DEFINITIONS "RAPIDJSON_HAS_STDSTRING=1")
endif()

if(AWP_BUILD_TESTS)
  find_package(Catch2 REQUIRED)
endif()
