# Helpers that keep every module's CMakeLists.txt to a few lines.

# Warnings are errors for our own code only (third-party headers are SYSTEM).
set(GK_WARNINGS -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)

# Test code (gk_test binaries, the shared test helpers) is compiled without
# optimisation even in the optimised build: the code under test keeps its
# flags, and test sources, heavy with gtest/gmock templates, build in half
# the time (-O2 spends most of a test file's compile time optimising).
set(GK_TEST_OPTIMIZE $<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-O0>)

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
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${GK_LABEL}
    DISCOVERY_TIMEOUT 60)
endfunction()
