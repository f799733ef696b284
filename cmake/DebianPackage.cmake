# The Debian package `sandgate` (docs/operations.md): the daemon, the CLI, sandgate-init, the
# systemd unit, the default config, man pages and completions, built from this tree by CPack:
#
#   cmake --build build --target sandgated sandgate sandgate-init && (cd build && cpack -G DEB)
#
# The package holds the install components `sandgate` (what `cmake --install` installs too)
# and `deb` (below); the Python client is its own component and not in it. It installs under /usr whatever CMAKE_INSTALL_PREFIX the build
# tree has: the daemon finds sandgate-init beside itself, under ../libexec/sandgate
# (daemon/app/daemon.cc), so no path is compiled in that the package depends on. Its runtime
# dependencies are the shared libraries' packages (dpkg-shlibdeps) plus bubblewrap, which
# makes every local sandbox, and python3, which the playbooks' programs run on inside them.
# tests/package/deb_install_test.sh installs it in a clean Debian root (ctest package.deb).

set(SANDGATE_DEB_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)
install(FILES ${SANDGATE_DEB_DIR}/sandgated.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT sandgate)
# What only the package installs (component `deb`, left out of a plain `cmake --install`, which
# must never write /etc or replace an operator's config): the unit, the default config, the
# docs.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/sandgated.service
  DESTINATION lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
# A conffile (deploy/debian/conffiles): dpkg keeps an operator's edits across upgrades.
install(FILES ${PROJECT_SOURCE_DIR}/examples/config/local.json
  DESTINATION /etc/sandgate RENAME sandgated.json COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/SECURITY.md
  ${PROJECT_SOURCE_DIR}/deploy/sandgated.example.json
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT deb EXCLUDE_FROM_ALL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  COMPONENT deb EXCLUDE_FROM_ALL FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/config/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sandgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "sandgate maintainers <sandgate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "gateway that runs AI agents' code in sandboxes")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "gateway that runs AI agents' code in sandboxes\n sandgated owns sandbox sessions and upstream API credentials, runs agent tasks in\n bubblewrap sandboxes, streams their events, verifies their artifacts and deletes every\n sandbox it made. sandgate is its command-line client.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The build tree keeps its debug info; the package does not (51 MB against about 10).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "bubblewrap, python3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${SANDGATE_DEB_DIR}/conffiles ${SANDGATE_DEB_DIR}/postinst ${SANDGATE_DEB_DIR}/prerm
  ${SANDGATE_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL sandgate deb)
set(CPACK_PACKAGE_FILE_NAME sandgate)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/package)
include(CPack)
