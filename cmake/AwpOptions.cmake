# Interface targets every awp target links PRIVATE: warnings as errors and sanitizers.
add_library(awp_warnings INTERFACE)
target_compile_options(awp_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor -Wold-style-cast
  -Wimplicit-fallthrough $<$<BOOL:${AWP_WERROR}>:-Werror>)

add_library(awp_sanitize INTERFACE)
foreach(s IN LISTS AWP_SANITIZE)
  target_compile_options(awp_sanitize INTERFACE -fsanitize=${s} -fno-omit-frame-pointer)
  target_link_options(awp_sanitize INTERFACE -fsanitize=${s})
endforeach()

# Each function and data object in a section of its own, and programs linked with --gc-sections
# (awp_add_executable): what nothing reaches is dropped, so what runs sits on fewer pages (the
# idle runner -0.6 MB RSS).
add_compile_options(-ffunction-sections -fdata-sections)

# The C++ runtime (libstdc++, libgcc) linked statically into the programs that allow it: a
# program then pages in only the part it uses (-0.8 MB idle RSS for the runner). A library target
# whose own dependencies load libstdc++.so sets INTERFACE_AWP_CXX_RUNTIME_SHARED (libs/embed: ICU),
# and the programs linking it keep the shared runtime rather than carry a second copy.
# Not with sanitizers: their runtimes expect the shared C++ runtime.
option(AWP_STATIC_CXX_RUNTIME "Link libstdc++ and libgcc statically where programs allow it" ON)

# awp_add_executable(name SOURCES ... [LIBS ...] [OPENSSL_SHARED]): a program in build/bin
# linked with the project's flags. With -DAWP_STATIC_OPENSSL=ON (cmake/Dependencies.cmake)
# OpenSSL is linked statically unless OPENSSL_SHARED says that a shared library the program calls
# links libcrypto.so itself (libjwt), where a static OpenSSL would be a second copy.
function(awp_add_executable name)
  cmake_parse_arguments(ARG "OPENSSL_SHARED" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} awp_warnings awp_sanitize)
  # Only the shared libraries a program really calls are loaded (smaller idle RSS).
  target_link_options(${name} PRIVATE LINKER:--as-needed LINKER:--gc-sections)
  if(NOT ARG_OPENSSL_SHARED)
    set_target_properties(${name} PROPERTIES AWP_STATIC_OPENSSL ON)  # read by awp::openssl
  endif()
  if(AWP_STATIC_CXX_RUNTIME AND NOT AWP_SANITIZE)
    set(shared_runtime "$<BOOL:$<TARGET_PROPERTY:AWP_CXX_RUNTIME_SHARED>>")
    target_link_options(${name} PRIVATE
                        "$<$<NOT:${shared_runtime}>:-static-libstdc++;-static-libgcc>")
  endif()
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
