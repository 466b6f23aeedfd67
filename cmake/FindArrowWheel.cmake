# Imports Arrow and Parquet C++ from the PyPI pyarrow wheel as qtft::arrow. The wheel ships
# headers and versioned shared libraries (libarrow.so.NNNN) but no CMake package.
# arrow_python is deliberately not linked: qtft never talks to a Python interpreter.
include(FindQtftPython)

qtft_python_eval(_arrow_info
  "import pyarrow as pa; print(pa.get_include() + ';' + pa.get_library_dirs()[0] + ';' + pa.__version__ + ';' + str(pa.cpp_build_info.so_version))")
list(GET _arrow_info 0 ARROW_WHEEL_INCLUDE)
list(GET _arrow_info 1 ARROW_WHEEL_LIBDIR)
list(GET _arrow_info 2 ARROW_WHEEL_VERSION)
list(GET _arrow_info 3 ARROW_WHEEL_SO_VERSION)

# IMPORTED, as find modules' targets are: the installed package's export names it and its
# qtftConfig.cmake defines it again from the consumer's wheel.
add_library(qtft::arrow INTERFACE IMPORTED)
# arrow_dataset (folder discovery, Hive partitions) needs arrow_acero at link time;
# arrow_compute holds the kernels (local_timestamp for --calendar-timezone).
foreach(_name arrow parquet arrow_acero arrow_dataset arrow_compute)
  set(_lib "${ARROW_WHEEL_LIBDIR}/lib${_name}.so.${ARROW_WHEEL_SO_VERSION}")
  if(NOT EXISTS "${_lib}")
    message(FATAL_ERROR "qtft: ${_lib} is missing from the pyarrow wheel")
  endif()
  target_link_libraries(qtft::arrow INTERFACE "${_lib}")
endforeach()
# The wheel has no ABI flag to query; a C++11-ABI build exports std::__cxx11 symbols.
qtft_python_eval(_arrow_cxx11
  "print(int(b'__cxx11' in open('${ARROW_WHEEL_LIBDIR}/libarrow.so.${ARROW_WHEEL_SO_VERSION}', 'rb').read()))")
if(NOT _arrow_cxx11 EQUAL 1)
  message(FATAL_ERROR "qtft: the pyarrow wheel in ${ARROW_WHEEL_LIBDIR} was not built with the C++11 ABI; qtft needs one that was.")
endif()
target_include_directories(qtft::arrow SYSTEM INTERFACE "${ARROW_WHEEL_INCLUDE}")
# Same ABI as LibTorch; mixing would break std::string across the two libraries.
target_compile_definitions(qtft::arrow INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
set_property(TARGET qtft::arrow APPEND PROPERTY INTERFACE_LINK_OPTIONS
  "LINKER:-rpath,${ARROW_WHEEL_LIBDIR}")

message(STATUS "qtft: Arrow ${ARROW_WHEEL_VERSION} (so ${ARROW_WHEEL_SO_VERSION}) from ${ARROW_WHEEL_LIBDIR}")
