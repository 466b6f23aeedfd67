# Imports LibTorch from the PyPI torch wheel as the target qtft::torch.
#
# We do not use the wheel's TorchConfig.cmake: it insists on locating a full CUDA toolkit
# (nvcc, cuDNN, ...) even to link CPU code, which makes configuring slow and fragile.
# The wheel's shared libraries and headers are all we need; the CUDA libraries are linked
# with --no-as-needed so that their static initializers register the CUDA backend even
# though no symbol of ours references them.
include(FindQtftPython)

qtft_python_eval(_torch_info
  "import os, torch; print(os.path.dirname(torch.__file__) + ';' + torch.__version__ + ';' + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))")
list(GET _torch_info 0 TORCH_WHEEL_DIR)
list(GET _torch_info 1 TORCH_WHEEL_VERSION)
list(GET _torch_info 2 _torch_cxx11_abi)

if(NOT _torch_cxx11_abi EQUAL 1)
  message(FATAL_ERROR
    "qtft: the torch wheel at ${TORCH_WHEEL_DIR} was built with the pre-C++11 ABI "
    "(_GLIBCXX_USE_CXX11_ABI=0); qtft needs a wheel built with the C++11 ABI.")
endif()

set(_torch_lib "${TORCH_WHEEL_DIR}/lib")
# IMPORTED, as find modules' targets are: the installed package's export names it and its
# qtftConfig.cmake defines it again from the consumer's wheel.
add_library(qtft::torch INTERFACE IMPORTED)
foreach(_name torch torch_cpu c10)
  if(NOT EXISTS "${_torch_lib}/lib${_name}.so")
    message(FATAL_ERROR "qtft: ${_torch_lib}/lib${_name}.so is missing from the torch wheel")
  endif()
  target_link_libraries(qtft::torch INTERFACE "${_torch_lib}/lib${_name}.so")
endforeach()

set(TORCH_WHEEL_HAS_CUDA OFF)
if(EXISTS "${_torch_lib}/libtorch_cuda.so")
  set(TORCH_WHEEL_HAS_CUDA ON)
  target_link_libraries(qtft::torch INTERFACE
    "-Wl,--no-as-needed"
    "${_torch_lib}/libtorch_cuda.so" "${_torch_lib}/libc10_cuda.so"
    "-Wl,--as-needed")
endif()

target_include_directories(qtft::torch SYSTEM INTERFACE
  "${TORCH_WHEEL_DIR}/include"
  "${TORCH_WHEEL_DIR}/include/torch/csrc/api/include")
target_compile_definitions(qtft::torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
# Binaries run from the build tree with no LD_LIBRARY_PATH; libtorch_cuda finds the
# nvidia-* wheels through its own RPATH.
set_property(TARGET qtft::torch APPEND PROPERTY INTERFACE_LINK_OPTIONS
  "LINKER:-rpath,${_torch_lib}")

message(STATUS "qtft: LibTorch ${TORCH_WHEEL_VERSION} from ${TORCH_WHEEL_DIR} (CUDA libraries: ${TORCH_WHEEL_HAS_CUDA})")
