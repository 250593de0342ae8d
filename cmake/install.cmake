# `cmake --install BUILD --prefix P`: the static libraries, the public headers, the `tessera` tool and the CMake
# package Tessera (P/lib/cmake/Tessera: TesseraConfig.cmake, TesseraConfigVersion.cmake, TesseraTargets.cmake), so
# that another project can find_package(Tessera) and link Tessera::core, ::cpu, ::cuda (when built), ::backends,
# ::sim, ::models, ::harness, ::llama, ::scenario and ::conformance (when the tests are built: it needs GTest). Layout in
# docs/architecture.md ("Installed layout"); examples/consumer is such a project and tests/install/check-consumer
# builds it against a fresh installation.
include(CMakePackageConfigHelpers)

set(TESSERA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)

# Exported targets are Tessera::<part>; the in-tree aliases tessera::<part> name the same libraries.
set(TESSERA_EXPORTED_TARGETS tessera_core tessera_cpu tessera_backends tessera_sim tessera_models tessera_harness
                             tessera_llama tessera_scenario)
if(TESSERA_HAVE_CUDA)
  list(APPEND TESSERA_EXPORTED_TARGETS tessera_cuda)
endif()
set(TESSERA_EXPORT_CONFORMANCE OFF)
if(TARGET tessera_conformance)
  set(TESSERA_EXPORT_CONFORMANCE ON)
  list(APPEND TESSERA_EXPORTED_TARGETS tessera_conformance tessera_conformance_archive)
endif()
foreach(target IN LISTS TESSERA_EXPORTED_TARGETS)
  string(REGEX REPLACE "^tessera_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
endforeach()

# (Each target names $<INSTALL_INTERFACE:include> itself, next to its build-tree include directory.)
install(TARGETS ${TESSERA_EXPORTED_TARGETS} EXPORT TesseraTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers only: every part keeps its public headers under <part>/tessera/ (what `#include "tessera/..."`
# names); the headers beside the sources (src/alloc, src/sched, backends/cpu/kernels, sim/sim_impl.h,
# harness/common/json_read.h, ...) are internal and stay out.
set(TESSERA_INCLUDE_DEST ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
file(GLOB TESSERA_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/src/tessera/*.h ${PROJECT_SOURCE_DIR}/backends/cpu/tessera/*.h
     ${PROJECT_SOURCE_DIR}/backends/tessera/*.h)
if(TESSERA_HAVE_CUDA)
  file(GLOB TESSERA_CUDA_HEADERS ${PROJECT_SOURCE_DIR}/backends/cuda/tessera/*.h)
  list(APPEND TESSERA_PUBLIC_HEADERS ${TESSERA_CUDA_HEADERS})
endif()
install(FILES ${TESSERA_PUBLIC_HEADERS} DESTINATION ${TESSERA_INCLUDE_DEST})
foreach(part sim models llama scenario)
  file(GLOB TESSERA_PART_HEADERS ${PROJECT_SOURCE_DIR}/${part}/tessera/${part}/*.h)
  install(FILES ${TESSERA_PART_HEADERS} DESTINATION ${TESSERA_INCLUDE_DEST}/${part})
endforeach()
# harness/ keeps its public headers in one folder per room: tessera/harness/<room>/*.h.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/tessera/harness/ DESTINATION ${TESSERA_INCLUDE_DEST}/harness
        FILES_MATCHING PATTERN "*.h")
if(TESSERA_EXPORT_CONFORMANCE)
  # In the tree the tests include it as "conformance/backend_conformance.h"; installed it sits with the other
  # headers, as "tessera/conformance/backend_conformance.h".
  install(FILES ${PROJECT_SOURCE_DIR}/tests/conformance/backend_conformance.h
          DESTINATION ${TESSERA_INCLUDE_DEST}/conformance)
endif()

install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TesseraConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
                              INSTALL_DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
# 0.x: a new minor version may change the interfaces.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TesseraConfig.cmake ${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
        DESTINATION ${TESSERA_INSTALL_CMAKEDIR})
