# Debian packages from the install components (`cpack -G DEB` in the build directory):
#   libdlock-dev   headers, libdlock.a (or the .so link), CMake config, dlock.pc
#   libdlockX.Y    libdlock.so.X.Y (only when DLOCK_SHARED is on)
#   dlock          the dlock command
# Run-time dependencies of binaries come from dpkg-shlibdeps; libdlock-dev's are listed here.
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
# A placeholder: set the real one when configuring (-DCPACK_PACKAGE_CONTACT="Name <mail>").
if(NOT CPACK_PACKAGE_CONTACT)
  set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 distributed locks on Redis")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(_dlock_soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Development files: headers, the library, a CMake package\n(find_package(dlock)) and dlock.pc for pkg-config.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libdlock${_dlock_soversion})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "The shared library libdlock.so.${_dlock_soversion}.")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_DESCRIPTION
    "The dlock command: run a command under a lock (dlock exec), inspect\nand break locks, ping, metrics and demos.")

# The headers need a C++20 compiler's standard library only; a static libdlock also needs OpenSSL
# and the config file asks for it (find_dependency(OpenSSL)).
set(_dlock_dev_depends "libssl-dev")
if(DLOCK_SHARED)
  string(APPEND _dlock_dev_depends
         ", libdlock${_dlock_soversion} (= ${PROJECT_VERSION})")
  set(CPACK_COMPONENTS_ALL dev runtime)
  # The CLI links the shared library: dpkg-shlibdeps must find it in this build tree.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_CURRENT_BINARY_DIR})
  set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libdlock${_dlock_soversion} (= ${PROJECT_VERSION})")
else()
  set(CPACK_COMPONENTS_ALL dev)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_dlock_dev_depends}")
if(DLOCK_BUILD_CLI)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()

include(CPack)
