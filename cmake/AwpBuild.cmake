# How awp builds fast (issue 41: a first run in five minutes on two cores). Where a cold build's
# CPU goes, measured per translation unit (-ftime-report, /usr/bin/time): code generation at
# -O2 -g is about two thirds of a unit (a test file: 12.0 of 17.8 s), parsing the Boost, Catch2,
# CLI11 and standard headers most of the rest, and small units are nearly all headers (the
# runner's 18-line main.cpp: 10.5 s). So:
#   * programs are linked by lld, or gold, when installed (AWP_LINKER);
#   * Catch2's runner (tests/support/catch_main.cxx, all of Catch2) is compiled once for the three
#     suites, and the benchmarks are not part of `all` (bench/*/run.sh build what they run);
#   * scripts/run-stack.sh builds the daemons and awpctl only; the scripts print their phases' times;
#   * the suites' own code compiles at -O0 (AWP_TEST_OPTIMIZE, tests/CMakeLists.txt): 181 -> 86 s
#     for the three suites, the code they test staying at -O2;
#   * AWP_DEBUG_INFO=lines (the default): optimized builds with line tables only (-g1), -27 to
#     -35 % of each unit's compile time, a quarter of the object size, and the links read a
#     fraction of the bytes; =full gives -g back.
#   * AWP_PCH: the headers nearly every unit parses (cmake/awp_pch.hpp: the standard library's,
#     Boost.Asio's coroutine core, RapidJSON; the suites' adds Catch2) are compiled once, by
#     awp_core (and awp_test_support for the suites), and every other target reuses that one
#     precompiled header (awp_use_pch, REUSE_FROM: one PCH for all, not one per target).
#   * AWP_UNITY (the default): unity builds. Each target's sources are compiled AWP_UNITY_BATCH
#     at a time, as one unit (CMake's UNITY_BUILD): the Asio, Beast, RapidJSON, Catch2 and
#     standard templates that every unit of a target instantiates and optimizes are compiled once
#     per batch instead of once per file. A unit's anonymous namespace is then shared with the
#     other units of its batch, so a target's units define no helper of the same name (a
#     helper two units need is in a header, once); the compiler refuses a clash. -DAWP_UNITY=OFF
#     compiles unit by unit (an edit then recompiles one file, not its batch).
# bench/build/cold.sh measures a cold build, before and after.

# -g (full DWARF) costs every optimized unit a quarter or more of its compile time and the links
# most of their input. Line tables (-g1) keep what backtraces, perf, gdb's `bt` and sanitizer
# reports show (function, file, line), not local variables. Debug builds keep -g.
set(AWP_DEBUG_INFO "lines" CACHE STRING
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

# Precompiled headers (see the top), for GCC and clang builds, the sanitizer and fuzz builds
# included (every target that uses the PCH has the same -fsanitize flags: awp_sanitize).
if(CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  set(_awp_pch_default ON)
else()
  set(_awp_pch_default OFF)
endif()
option(AWP_PCH "Precompile the common headers once (GCC and clang)" ${_awp_pch_default})
# GCC 12 inlines std::string's copies differently in a unit built on the PCH and then reports
# out-of-bounds memcpy inside libstdc++'s char_traits.h:431 (GCC bugs 105651, 106199 and kin: a
# false positive in units whose own code indexes nothing; 10 units with -Warray-bounds, then 8
# with -Wstringop-overflow/-overread). These three are off for GCC 12 builds with the PCH;
# out-of-bounds access is what the sanitizer build (clang, ASan, scripts/test-sanitize.sh)
# checks at run time, and GCC builds with -DAWP_PCH=OFF still warn.
if(AWP_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(awp_warnings INTERFACE -Wno-array-bounds -Wno-stringop-overflow
                                                -Wno-stringop-overread)
endif()
# Unity builds (see the top). CMAKE_UNITY_BUILD sets every target's UNITY_BUILD as it is created,
# so this file is included before the targets. GCC 12 reports a coroutine frame whose locals have
# a type of an anonymous namespace (-Wsubobject-linkage) when that namespace is not in the main
# file, which in a unity build it never is: the warning guards a type defined in a header that
# several units include, and a unit of a batch is included once, into one object. Off in unity
# builds only; unit-by-unit builds keep it.
option(AWP_UNITY "Compile each target's sources in batches (unity build)" ON)
set(AWP_UNITY_BATCH 16 CACHE STRING "Sources per unity batch (AWP_UNITY)")
if(AWP_UNITY)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE ${AWP_UNITY_BATCH})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-subobject-linkage)
  endif()
endif()
message(STATUS "awp: unity build ${AWP_UNITY} (batches of ${AWP_UNITY_BATCH})")

# Units that parse their headers themselves, alone (no PCH, no unity batch): the
# separate-compilation units (Asio's, Beast's) define what the header declares; the last two have
# a definition of their own (a PCH is used only with exactly the definitions it was made with).
set(AWP_PCH_SKIP libs/core/src/asio_impl.cpp libs/http/src/beast_impl.cpp
                 libs/core/src/migrate.cpp apps/command-runner/config.cpp)

# awp_use_pch(<owner> <header> <target>...): <owner> compiles <header> once; each <target> reuses
# it. The targets must share the owner's code-generation flags and its definitions exactly (every
# awp target linking awp::core does: the project's options and awp::core's definitions; a
# definition of one unit goes on that unit, listed in AWP_PCH_SKIP). GCC refuses a PCH made with
# other definitions (-Winvalid-pch, an error here), so a mismatch cannot pass unnoticed.
function(awp_use_pch owner header)
  if(NOT TARGET ${owner})
    return()
  endif()
  foreach(t IN ITEMS ${owner} ${ARGN})
    if(TARGET ${t})
      get_target_property(sources ${t} SOURCES)
      get_target_property(dir ${t} SOURCE_DIR)
      foreach(src IN LISTS sources)
        get_filename_component(path ${src} ABSOLUTE BASE_DIR ${dir})
        file(RELATIVE_PATH path ${PROJECT_SOURCE_DIR} ${path})
        if(path IN_LIST AWP_PCH_SKIP)
          set_source_files_properties(${src} DIRECTORY ${dir} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
                                                                         SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
      endforeach()
    endif()
  endforeach()
  if(NOT AWP_PCH)
    return()
  endif()
  target_precompile_headers(${owner} PRIVATE ${header})
  foreach(t IN LISTS ARGN)
    if(TARGET ${t})
      target_precompile_headers(${t} REUSE_FROM ${owner})
    endif()
  endforeach()
endfunction()
