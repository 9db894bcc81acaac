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

# awp_add_executable(name SOURCES ...): a program in build/bin linked with the project's flags.
function(awp_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} awp_warnings awp_sanitize)
  # Only the shared libraries a program really calls are loaded (smaller idle RSS).
  target_link_options(${name} PRIVATE LINKER:--as-needed)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
