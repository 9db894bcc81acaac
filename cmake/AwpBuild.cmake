# How awp builds fast (issue 41: a first run in five minutes on two cores). Where a cold build's
# CPU goes, measured per translation unit (-ftime-report, /usr/bin/time): code generation at
# -O2 -g is about two thirds of a unit (a test file: 12.0 of 17.8 s), parsing the Boost, Catch2,
# CLI11 and standard headers most of the rest, and small units are nearly all headers (the
# runner's 18-line main.cpp: 10.5 s). So:
#   * programs are linked by lld, or gold, when installed (AWP_LINKER);
#   * Catch2's runner (tests/support/catch_main.cxx, all of Catch2) is compiled once for the three
#     suites, and the benchmarks are not part of `all` (bench/*/run.sh build what they run);
#   * scripts/run-stack.sh builds the daemons and awpctl only; the scripts print their phases' times;
#   * AWP_DEBUG_INFO=lines: optimized builds with line tables only (-g1), -27 to -35 % of each
#     unit's compile time, a quarter of the object size, and the links read a fraction of the
#     bytes. Not the default yet: it changes every unit's flags, so every ccache (CI's included)
#     compiles everything once again (bench/runner/RESULTS.md, 2026-11-28).
# Measured and not used: unity builds (the units define helpers of the same name in their
# anonymous namespaces, and GCC 12 refuses a coroutine frame of one unit inside another,
# -Wsubobject-linkage) and precompiled headers (the runner's main.cpp 7.3 -> 4.7 s, but with them
# GCC 12 inlines differently and -Werror=array-bounds fails on std::string copies in
# libs/core crypto.cpp, libs/realtime pgoutput.cpp and libs/rest headers.cpp: false positives that
# would need changes in those sources). bench/build/cold.sh measures a cold build, before and after.

# -g (full DWARF) costs every optimized unit a quarter or more of its compile time and the links
# most of their input. Line tables (-g1) keep what backtraces, perf, gdb's `bt` and sanitizer
# reports show (function, file, line), not local variables. Debug builds keep -g.
set(AWP_DEBUG_INFO "full" CACHE STRING
    "Debug information of optimized builds: lines (-g1), full (-g) or none (-g0)")
set_property(CACHE AWP_DEBUG_INFO PROPERTY STRINGS lines full none)
if(AWP_DEBUG_INFO STREQUAL "lines")
  add_compile_options($<$<CONFIG:RelWithDebInfo>:-g1>)
elseif(AWP_DEBUG_INFO STREQUAL "none")
  add_compile_options($<$<CONFIG:RelWithDebInfo>:-g0>)
elseif(NOT AWP_DEBUG_INFO STREQUAL "full")
  message(FATAL_ERROR "AWP_DEBUG_INFO must be lines, full or none, not '${AWP_DEBUG_INFO}'")
endif()

# The linker: lld when installed, else gold (binutils: always there on Debian), else the
# compiler's default (GNU ld, the slowest of the three).
set(AWP_LINKER "auto" CACHE STRING "Linker: auto (lld, else gold), lld, gold or default")
set_property(CACHE AWP_LINKER PROPERTY STRINGS auto lld gold default)
set(_awp_linker "${AWP_LINKER}")
if(_awp_linker STREQUAL "auto")
  find_program(AWP_LLD_PROGRAM ld.lld)
  find_program(AWP_GOLD_PROGRAM ld.gold)
  if(AWP_LLD_PROGRAM)
    set(_awp_linker lld)
  elseif(AWP_GOLD_PROGRAM)
    set(_awp_linker gold)
  else()
    set(_awp_linker default)
  endif()
endif()
if(NOT _awp_linker STREQUAL "default")
  add_link_options(-fuse-ld=${_awp_linker})
endif()

message(STATUS "awp: linker ${_awp_linker}, debug information ${AWP_DEBUG_INFO}")
