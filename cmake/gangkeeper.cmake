# Helpers that keep every module's CMakeLists.txt to a few lines.

# Warnings are errors for our own code only (third-party headers are SYSTEM).
set(GK_WARNINGS -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
# Unity builds (CMAKE_UNITY_BUILD=ON, what test.sh uses on the CI's two
# cores: a module's sources compiled as a few batches parse the shared
# headers once per batch, not once per file). GCC then warns when a class
# with linkage holds a type from another source file's anonymous namespace;
# in a batch that is harmless (each file's own anonymous namespace is still
# private to the batch). Names in anonymous namespaces (and static
# functions) must be unique per target: a clash fails the CI's build.
if(CMAKE_UNITY_BUILD)
  list(APPEND GK_WARNINGS -Wno-subobject-linkage)
endif()

# Test code (gk_test binaries, the shared test helpers) is compiled without
# optimisation even in the optimised build: the code under test keeps its
# flags, and test sources, heavy with gtest/gmock templates, build in half
# the time (-O2 spends most of a test file's compile time optimising).
set(GK_TEST_OPTIMIZE $<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-O0>)
# In the sanitizer build (GK_SANITIZE) the test code itself is compiled
# without instrumentation: the libraries under test keep ASan and UBSan
# (every load and store of gangkeeper's own code is checked, and the runtime
# intercepts memcpy, strlen, malloc and free everywhere), while the gtest
# bodies, fixtures and fakes, which were half of the sanitizer build's
# compile time, build as fast as in the release build. The test binaries
# still link the sanitizer runtimes, so leaks are found in both.
# __SANITIZE_ADDRESS__ stays defined: headers shared by both sides (abseil's
# hash tables poison their empty slots, through the runtime, when it is)
# must compile to the same inline code in the tests as in the libraries,
# or a slot written by the tests' copy is read as poisoned by the library.
if(GK_SANITIZE)
  list(APPEND GK_TEST_OPTIMIZE -fno-sanitize=all -D__SANITIZE_ADDRESS__=1)
endif()

# gk_module(NAME SOURCES a.cc b.cc PUBLIC_DEPS ... PRIVATE_DEPS ...)
# Builds the static library gangkeeper_NAME (alias gangkeeper::NAME).
function(gk_module name)
  cmake_parse_arguments(GK "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(gangkeeper_${name} STATIC ${GK_SOURCES})
  add_library(gangkeeper::${name} ALIAS gangkeeper_${name})
  target_include_directories(gangkeeper_${name}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(gangkeeper_${name} PRIVATE ${GK_WARNINGS})
  target_link_libraries(gangkeeper_${name} PUBLIC ${GK_PUBLIC_DEPS} PRIVATE ${GK_PRIVATE_DEPS})
endfunction()

# Test sources all include gtest/gmock and most of them nlohmann_json and
# abseil: parsing those headers was half of a test file's compile time. One
# precompiled header, built once, is used by every gk_test target
# (GK_TEST_PCH=OFF turns it off). It is compiled with the test targets'
# flags; macros the tests define (GK_SOURCE_DIR ...) do not appear in it.
option(GK_TEST_PCH "Precompile the headers every test includes" ON)
set(GK_TEST_PCH_HEADERS
  <algorithm> <functional> <map> <memory> <optional> <set> <string> <utility> <vector>
  [["gmock/gmock.h"]] [["gtest/gtest.h"]] [["nlohmann/json.hpp"]]
  [["absl/status/status.h"]] [["absl/status/statusor.h"]] [["absl/strings/str_cat.h"]]
  [["absl/time/clock.h"]] [["absl/time/time.h"]])

function(gk_test_pch_host)
  if(TARGET gangkeeper_test_pch OR NOT GK_TEST_PCH)
    return()
  endif()
  file(WRITE ${CMAKE_BINARY_DIR}/gangkeeper_test_pch.cc "// The host of the tests' precompiled header.\n")
  add_library(gangkeeper_test_pch STATIC ${CMAKE_BINARY_DIR}/gangkeeper_test_pch.cc)
  target_include_directories(gangkeeper_test_pch PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(gangkeeper_test_pch PRIVATE ${GK_WARNINGS} ${GK_TEST_OPTIMIZE})
  target_link_libraries(gangkeeper_test_pch PRIVATE GTest::gmock GTest::gtest nlohmann_json::nlohmann_json absl::status
                        absl::statusor absl::strings absl::time)
  target_precompile_headers(gangkeeper_test_pch PRIVATE ${GK_TEST_PCH_HEADERS})
endfunction()

# gk_test(NAME SOURCES ... DEPS ... LABEL unit|integration)
# One gtest binary per module, discovered into ctest with a label.
function(gk_test name)
  cmake_parse_arguments(GK "" "LABEL" "SOURCES;DEPS" ${ARGN})
  if(NOT GK_LABEL)
    set(GK_LABEL unit)
  endif()
  add_executable(${name} ${GK_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${name} PRIVATE ${GK_WARNINGS} ${GK_TEST_OPTIMIZE})
  target_link_libraries(${name} PRIVATE ${GK_DEPS} GTest::gmock GTest::gtest GTest::gtest_main)
  if(GK_TEST_PCH)
    gk_test_pch_host()
    target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json)  # the header's include paths
    target_precompile_headers(${name} REUSE_FROM gangkeeper_test_pch)
  endif()
  if(GK_SANITIZE AND GK_LABEL STREQUAL "unit")
    # Under the sanitizers a test process takes 0.2-0.4 s to start (the
    # instrumented static initialisation of the binary and its libraries),
    # longer than most unit tests run: one process per test was about two
    # minutes of the CI's two cores. A unit binary runs as one ctest test;
    # integration tests (long, two at a time) stay one process per test.
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
    set_tests_properties(${name} PROPERTIES LABELS ${GK_LABEL})
  else()
    gtest_discover_tests(${name}
      PROPERTIES LABELS ${GK_LABEL}
      DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
