# Apache Arrow C++ and its Parquet reader for the columnar sources
# (docs/columnar.md, "Library"): the shared libraries and headers a pyarrow
# wheel ships (pyarrow/include, pyarrow/libarrow.so.<N>, libparquet.so.<N>).
# Debian 12 packages no Arrow; PyPI's wheel is the well-kept build every
# Python user already has, and linking it means a process that imports
# pyarrow too holds one Arrow, not two (the dynamic loader matches the
# SONAME).
#
#   FEEDLINE_WITH_ARROW  AUTO (default): on when a pyarrow is found; ON: required; OFF: without
#   FEEDLINE_PYARROW_DIR the pyarrow package folder; empty: Python_EXECUTABLE's pyarrow
#
# Without Arrow the build still works and a Parquet or Arrow source is
# refused with an error that says how to get it (src/io/columnar_disabled.cc).
set(FEEDLINE_WITH_ARROW AUTO CACHE STRING "Parquet/Arrow IPC sources via a pyarrow wheel's Arrow C++: AUTO, ON or OFF")
set(FEEDLINE_PYARROW_DIR "" CACHE PATH "The pyarrow package folder to take Arrow C++ from (empty: Python_EXECUTABLE's)")
set(FEEDLINE_HAVE_ARROW OFF)
if(NOT FEEDLINE_WITH_ARROW STREQUAL "OFF")
  if(NOT FEEDLINE_PYARROW_DIR AND Python_EXECUTABLE)
    execute_process(COMMAND ${Python_EXECUTABLE} -c "import os, pyarrow; print(os.path.dirname(pyarrow.__file__))"
                    OUTPUT_VARIABLE _pa_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _pa_rc)
    if(_pa_rc EQUAL 0)
      set(FEEDLINE_PYARROW_DIR "${_pa_dir}")
    endif()
  endif()
  set(_arrow_lib "")
  set(_parquet_lib "")
  if(FEEDLINE_PYARROW_DIR)
    # The SONAME'd files (libarrow.so.2600), not the fully versioned ones.
    file(GLOB _arrow_libs "${FEEDLINE_PYARROW_DIR}/libarrow.so.[0-9]*")
    file(GLOB _parquet_libs "${FEEDLINE_PYARROW_DIR}/libparquet.so.[0-9]*")
    foreach(_l IN LISTS _arrow_libs)
      if(_l MATCHES "/libarrow\\.so\\.[0-9]+$")
        set(_arrow_lib "${_l}")
      endif()
    endforeach()
    foreach(_l IN LISTS _parquet_libs)
      if(_l MATCHES "/libparquet\\.so\\.[0-9]+$")
        set(_parquet_lib "${_l}")
      endif()
    endforeach()
  endif()
  # The release the sources are written against (scripts/requirements-arrow.txt):
  # another major has another API and another SONAME.
  set(_arrow_major "")
  if(EXISTS "${FEEDLINE_PYARROW_DIR}/include/arrow/util/config.h")
    file(STRINGS "${FEEDLINE_PYARROW_DIR}/include/arrow/util/config.h" _major_line
         REGEX "^#define ARROW_VERSION_MAJOR [0-9]+")
    string(REGEX REPLACE "^#define ARROW_VERSION_MAJOR ([0-9]+).*" "\\1" _arrow_major "${_major_line}")
  endif()
  if(_arrow_lib AND NOT _arrow_major STREQUAL "25")
    message(STATUS "feedline: the pyarrow in ${FEEDLINE_PYARROW_DIR} is Arrow ${_arrow_major}, not 25 "
                   "(scripts/requirements-arrow.txt): not used")
    set(_arrow_lib "")
  endif()
  if(_arrow_lib AND _parquet_lib AND EXISTS "${FEEDLINE_PYARROW_DIR}/include/parquet/arrow/reader.h")
    set(FEEDLINE_HAVE_ARROW ON)
    add_library(feedline_arrow INTERFACE IMPORTED GLOBAL)
    target_include_directories(feedline_arrow SYSTEM INTERFACE "${FEEDLINE_PYARROW_DIR}/include")
    target_link_libraries(feedline_arrow INTERFACE "${_parquet_lib}" "${_arrow_lib}")
    # Every binary of the build tree finds them where they are; the Python
    # extension also beside itself in an installed tree (python/CMakeLists.txt).
    list(APPEND CMAKE_BUILD_RPATH "${FEEDLINE_PYARROW_DIR}")
    message(STATUS "feedline: Parquet and Arrow IPC sources with ${_parquet_lib}")
  elseif(FEEDLINE_WITH_ARROW STREQUAL "ON")
    message(FATAL_ERROR "FEEDLINE_WITH_ARROW=ON but no pyarrow with headers and libraries was found "
                        "(FEEDLINE_PYARROW_DIR='${FEEDLINE_PYARROW_DIR}'): pip install pyarrow (scripts/requirements-arrow.txt)")
  else()
    message(STATUS "feedline: no pyarrow found (FEEDLINE_PYARROW_DIR); Parquet and Arrow sources are refused")
  endif()
endif()
