# Helpers so that each library, test or benchmark is one short block.

function(feedline_setup_flags)
  # -Wno-missing-field-initializers: C++20 designated initializers that leave
  # members at their defaults are intended, not a mistake.
  add_compile_options(-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                      -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports impossible overlaps in std::string concatenation at -O2+
    # (GCC bug 105329, a false positive fixed in GCC 13).
    add_compile_options(-Wno-restrict)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Checks the GUARDED_BY / REQUIRES annotations of src/core/mutex.h.
    add_compile_options(-Wthread-safety)
  endif()
  if(FEEDLINE_WERROR)
    add_compile_options(-Werror)
  endif()
  if(FEEDLINE_SANITIZE STREQUAL "address")
    # -O1 on top of the Debug build (asserts stay): AddressSanitizer's own
    # advice for usable speed. At -O0 the SIMD tests that force every
    # compiled Highway target in turn ran past their 300 s timeout on a
    # machine with AVX-512 (color_ops_test, CI 2026-12-07).
    add_compile_options(-O1 -fsanitize=address,undefined -fno-sanitize-recover=all
                        -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
  elseif(FEEDLINE_SANITIZE STREQUAL "thread")
    add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
    add_link_options(-fsanitize=thread)
  elseif(NOT FEEDLINE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "FEEDLINE_SANITIZE must be '', 'address' or 'thread'")
  endif()
endfunction()

# feedline_cc_library(NAME name SRCS ... DEPS ...)
function(feedline_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS})
  target_include_directories(${ARG_NAME}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
endfunction()

# feedline_cc_test(NAME name SRCS ... DEPS ... [TIMEOUT seconds] [LABELS ...])
# Every test carries a TIMEOUT: a hang is a failure, never a stuck CI.
function(feedline_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()

# feedline_cc_benchmark(NAME name SRCS ... DEPS ...)
function(feedline_cc_benchmark)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
endfunction()
