# Checks the order of the areas: a file under include/qtft/<area>/ or src/<area>/ may include
# only headers of its own area or of an area listed before it in AREAS, so that an include
# that runs upward fails the build instead of waiting for a review. data's rooms are areas
# of two components (data/bars, data/features, data/store).
#   cmake -DROOT=<tree> -DAREAS=common,io,... [-DSTAMP=<file>] -P CheckLayering.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" AREAS "${AREAS}")
set(violations "")
foreach(area IN LISTS AREAS)
  list(FIND AREAS "${area}" rank)
  file(GLOB_RECURSE files "${ROOT}/include/qtft/${area}/*" "${ROOT}/src/${area}/*")
  foreach(path IN LISTS files)
    file(STRINGS "${path}" includes REGEX "^#include \"qtft/[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"(qtft/(data/[a-z_]+|[a-z_]+)/[^\"]+)\".*" "\\1;\\2" parsed "${line}")
      list(GET parsed 0 header)
      list(GET parsed 1 target_area)
      list(FIND AREAS "${target_area}" target_rank)
      if(target_rank GREATER rank)
        file(RELATIVE_PATH relative "${ROOT}" "${path}")
        string(APPEND violations "  ${relative} includes ${header}: ${area} lies below ${target_area}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" " -> " order "${AREAS}")
  message(FATAL_ERROR "Includes that run upward (each area may include only those before it: ${order}):\n"
                      "${violations}")
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
