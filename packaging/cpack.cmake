# Debian packages through CPack, one per install component (CMakeLists.txt):
#   starling-runtime  libstarling.so.0 (+ libstarling_cuda.so where built), starlingrun
#   starling-dev      starling.h, the libstarling.so link, the CMake package, starling.pc
# Built with `cpack -G DEB` in the build directory (tests/packaging/deb_test.sh), installed
# with `apt-get install ./starling-runtime_*.deb ./starling-dev_*.deb` so that apt
# resolves the dependencies declared here.
set(CPACK_PACKAGE_NAME starling)
set(CPACK_PACKAGE_VENDOR "Starling")
set(CPACK_PACKAGE_CONTACT "Starling developers <starling@localhost>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would put it before each component's
# description, whose first line is that package's own synopsis.
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Installed under /usr whatever CMAKE_INSTALL_PREFIX the build was configured with. The
# library directory stays the build's CMAKE_INSTALL_LIBDIR ("lib" for the default
# /usr/local prefix), so the files land in /usr/lib: on the linker's and pkg-config's
# default paths, though not in Debian's multiarch directory.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Only these two: the python component is the wheel's (setup.py), and Java's files stay
# out of the Debian packages for now.
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(_starling_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME starling-runtime)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "decentralized collective communication over Open MPI (runtime)
Starling averages tensors with neighbors on a virtual graph (decentralized
training), with one-sided windows and the classic collectives. This package
holds libstarling.so.0, its C ABI (tensors as DLPack views), and the
starlingrun launcher.")
# The shared-library dependencies (libopenmpi3, libstdc++6, libc6, ...) come from
# dpkg-shlibdeps; starlingrun runs Open MPI's mpirun, which is in openmpi-bin.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "openmpi-bin")
# A shlibs file, so that packages built against libstarling.so.0 depend on this one;
# ">=" since the ABI only grows within a major version. (A global setting: only the
# runtime package holds a library with a SONAME; CPack warns that libstarling_cuda.so has
# none, rightly: it is a plugin, loaded by path.)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# libstarling_cuda.so needs only the NVIDIA driver, loaded at run time (and only for the
# first CUDA tensor), so the driver is a suggestion, not a dependency.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "libcuda1")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME starling-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "decentralized collective communication over Open MPI (development files)
Starling's C99 header starling/starling.h, the CMake package
(find_package(Starling), target Starling::starling) and the pkg-config file
(pkg-config starling), to build programs against libstarling.so.0.")
# starling.h includes <dlpack/dlpack.h> and StarlingConfig.cmake finds dlpack's CMake
# package: both are in libdlpack-dev. The header needs no MPI header (a host
# communicator crosses as a Fortran handle), so libopenmpi-dev is only recommended, for
# programs that create their own communicator.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "starling-runtime (= ${_starling_deb_version}), libdlpack-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "libopenmpi-dev, pkg-config")

include(CPack)
