# Third-party packages, all from Debian bookworm (scripts/install-deps.sh installs them).
# Imported targets keep their headers SYSTEM, so -Werror judges only our code.
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED CONFIG)
find_package(CLI11 CONFIG REQUIRED)
find_package(OpenSSL 3 REQUIRED)
# OpenSSL (target awp::openssl): shared by default. -DAWP_STATIC_OPENSSL=ON links libssl.a and
# libcrypto.a into each program made by awp_add_executable (cmake/AwpOptions.cmake) that does
# not say OPENSSL_SHARED. It lowers a daemon's idle RSS by another ~0.7 MB (only the part of
# libcrypto it uses is paged in) but raises its PSS by ~1.9 MB and its private memory by ~2.7 MB
# (libcrypto.so's pages are shared with every other process using it), and an OpenSSL security
# update then needs a rebuild: worth it only for a host that runs a single daemon
# (docs/operations.md, "Static libraries").
option(AWP_STATIC_OPENSSL "Link OpenSSL statically into the programs that allow it" OFF)
add_library(awp::openssl INTERFACE IMPORTED)
set(_openssl_static "$<BOOL:$<TARGET_PROPERTY:AWP_STATIC_OPENSSL>>")
if(AWP_STATIC_OPENSSL)
  get_filename_component(_openssl_libdir ${OPENSSL_CRYPTO_LIBRARY} DIRECTORY)
  foreach(lib IN ITEMS ssl crypto)
    if(NOT EXISTS ${_openssl_libdir}/lib${lib}.a)
      message(FATAL_ERROR "${_openssl_libdir}/lib${lib}.a is missing: install libssl-dev, or "
                          "configure with -DAWP_STATIC_OPENSSL=OFF")
    endif()
    add_library(awp::lib${lib}.a STATIC IMPORTED)
    set_target_properties(awp::lib${lib}.a PROPERTIES IMPORTED_LOCATION
                                                      ${_openssl_libdir}/lib${lib}.a)
  endforeach()
  set_target_properties(awp::libssl.a PROPERTIES INTERFACE_LINK_LIBRARIES awp::libcrypto.a)
  set_target_properties(awp::libcrypto.a PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
                                                    ${OPENSSL_INCLUDE_DIR}
                        INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
  set_target_properties(awp::openssl PROPERTIES INTERFACE_LINK_LIBRARIES
    "$<${_openssl_static}:awp::libssl.a>;$<$<NOT:${_openssl_static}>:OpenSSL::SSL>")
  message(STATUS "OpenSSL: static (${_openssl_libdir}/libcrypto.a) in the programs that allow it")
else()
  set_target_properties(awp::openssl PROPERTIES INTERFACE_LINK_LIBRARIES OpenSSL::SSL)
  message(STATUS "OpenSSL: shared (${OPENSSL_CRYPTO_LIBRARY})")
endif()
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

# libpq (target awp::libpq): the static build that scripts/install-deps.sh makes from Debian's
# postgresql-15 source package, without LDAP and GSSAPI, when it is installed; Debian's shared
# libpq5 otherwise, or with -DAWP_SYSTEM_LIBPQ=ON. libpq5 links libldap (GnuTLS, nettle,
# p11-kit, SASL) and Kerberos, ~3.5 MB of resident memory per daemon that awp never uses
# (docs/operations.md, "Static libraries").
option(AWP_SYSTEM_LIBPQ "Link Debian's shared libpq5 even when the static libpq is installed" OFF)
set(AWP_LIBPQ_ROOT /opt/awp-libpq/current
    CACHE PATH "Prefix of the static libpq built by scripts/install-deps.sh")
set(AWP_LIBPQ_STATIC OFF)
if(NOT AWP_SYSTEM_LIBPQ)
  set(_libpq_files lib/libpq.a lib/libpgcommon_shlib.a lib/libpgport_shlib.a include/libpq-fe.h)
  set(AWP_LIBPQ_STATIC ON)
  foreach(f IN LISTS _libpq_files)
    if(NOT EXISTS ${AWP_LIBPQ_ROOT}/${f})
      set(AWP_LIBPQ_STATIC OFF)
    endif()
  endforeach()
endif()
# For tests/deploy/static_links.sh.
set(AWP_LIBPQ_STATIC_BUILD ${AWP_LIBPQ_STATIC} CACHE INTERNAL "awp links the static libpq")
add_library(awp::libpq INTERFACE IMPORTED)
if(AWP_LIBPQ_STATIC)
  # Paths through "current" keep compile commands (and so ccache hits) the same when
  # install-deps builds a newer libpq; Ninja follows the link and relinks.
  file(REAL_PATH ${AWP_LIBPQ_ROOT} _libpq_dir)
  # The three archives, each linking the next: libpq, libpgcommon, libpgport (whose
  # pg_strong_random calls OpenSSL).
  foreach(lib IN ITEMS pq pgcommon_shlib pgport_shlib)
    add_library(awp::lib${lib}.a STATIC IMPORTED)
    set_target_properties(awp::lib${lib}.a PROPERTIES
                          IMPORTED_LOCATION ${AWP_LIBPQ_ROOT}/lib/lib${lib}.a)
  endforeach()
  set_target_properties(awp::libpq.a PROPERTIES INTERFACE_LINK_LIBRARIES awp::libpgcommon_shlib.a)
  set_target_properties(awp::libpgcommon_shlib.a PROPERTIES INTERFACE_LINK_LIBRARIES
                                                            awp::libpgport_shlib.a)
  set_target_properties(awp::libpgport_shlib.a PROPERTIES INTERFACE_LINK_LIBRARIES
                                                          "awp::openssl;Threads::Threads;m")
  set_target_properties(awp::libpq PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
                                              ${AWP_LIBPQ_ROOT}/include
                        INTERFACE_LINK_LIBRARIES awp::libpq.a)
  file(STRINGS ${_libpq_dir}/VERSION _libpq_version LIMIT_COUNT 1)
  message(STATUS "libpq: static, without LDAP and GSSAPI: ${_libpq_version} in ${_libpq_dir}")
else()
  find_package(PostgreSQL REQUIRED)
  set_target_properties(awp::libpq PROPERTIES INTERFACE_LINK_LIBRARIES PostgreSQL::PostgreSQL)
  if(AWP_SYSTEM_LIBPQ)
    message(STATUS "libpq: the system's shared libpq (${PostgreSQL_LIBRARIES}), "
                   "as AWP_SYSTEM_LIBPQ asks")
  else()
    message(STATUS "libpq: the system's shared libpq (${PostgreSQL_LIBRARIES}); no static libpq in "
                   "${AWP_LIBPQ_ROOT} (scripts/install-deps.sh builds it)")
  endif()
endif()

if(AWP_BUILD_TESTS)
  find_package(Catch2 REQUIRED)
endif()
