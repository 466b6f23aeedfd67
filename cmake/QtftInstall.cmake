# `cmake --install build --prefix P`: headers, the static libraries (one per area), the qtft program
# and a CMake package, so that another project can
#   find_package(qtft CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE qtft::qtft)
# The package finds LibTorch and Arrow again in the consumer, from the wheels of the Python
# named by QTFT_PYTHON (default: the one this build used), with the same find modules.
include(CMakePackageConfigHelpers)

# Every area's library is installed (qtft::qtft links them); consumers name qtft::qtft, or
# qtft::core for the LibTorch-free data and I/O alone.
set(qtft_installed_libraries qtft qtft_core qtft_tensors)
foreach(area IN LISTS QTFT_AREAS)
  string(REPLACE "/" "_" library "${area}")  # data/bars: qtft_data_bars
  list(APPEND qtft_installed_libraries qtft_${library})
endforeach()
# The ONNX export stays inside the program: its library links Debian's ONNX, which a
# consumer of qtft::qtft need not have.
list(REMOVE_ITEM qtft_installed_libraries qtft_onnx)
foreach(library IN LISTS qtft_installed_libraries)
  string(REGEX REPLACE "^qtft_" "" export_name "${library}")
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${export_name})
endforeach()
install(TARGETS ${qtft_installed_libraries} EXPORT qtftTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS qtft_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
# The public headers only: each area's detail/ holds what its own sources share.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/qtft" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        PATTERN "detail" EXCLUDE PATTERN "onnx" EXCLUDE)
install(FILES "${PROJECT_BINARY_DIR}/include/qtft/version.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/qtft")

set(QTFT_PACKAGE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/qtft")
install(EXPORT qtftTargets NAMESPACE qtft:: DESTINATION "${QTFT_PACKAGE_DIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/qtftConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/qtftConfig.cmake" INSTALL_DESTINATION "${QTFT_PACKAGE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/qtftConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/qtftConfig.cmake" "${PROJECT_BINARY_DIR}/qtftConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindQtftPython.cmake" "${PROJECT_SOURCE_DIR}/cmake/FindTorchWheel.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindArrowWheel.cmake"
        DESTINATION "${QTFT_PACKAGE_DIR}")
