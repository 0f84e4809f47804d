dnl gpuport_symver.m4 -- symbol versions on the installed libraries.
dnl
dnl GPUPORT_CHECK_SYMVER takes --enable-symbol-versions[=yes|no|auto]
dnl (default auto) and finds out whether the linker applies a version script
dnl (-Wl,--version-script: GNU ld, gold, lld). It sets
dnl   AM_CONDITIONAL HAVE_SYMVER   the libraries link with src/libgpuport.map
dnl                                and mpi/libgpuport_mpi.map
dnl   GPUPORT_HAVE_SYMVER 0|1      in build_config.h (test/tools/exports.sh
dnl                                reads it: every export must then carry its
dnl                                version)
dnl An explicit yes that the linker cannot meet stops configure. As gnulib's
dnl ld-version-script check does, a script that is not one must fail the
dnl link first, so that a linker that ignores the option is not taken for
dnl one that applies it.

AC_DEFUN([GPUPORT_CHECK_SYMVER], [
AC_ARG_ENABLE([symbol-versions],
  [AS_HELP_STRING([--enable-symbol-versions@<:@=yes|no|auto@:>@],
    [give the libraries' exports symbol versions through a linker version script (default: auto, where the linker supports it)])],
  [], [enable_symbol_versions=auto])
AS_CASE([$enable_symbol_versions],
  [yes|no|auto], [],
  [AC_MSG_ERROR([--enable-symbol-versions=$enable_symbol_versions: use yes, no or auto])])
gpuport_have_symver=no
AS_IF([test "x$enable_symbol_versions" != xno], [
  AC_MSG_CHECKING([whether the linker applies a version script (-Wl,--version-script)])
  gpuport_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS -Wl,--version-script=conftest.map"
  echo 'not a version script {' >conftest.map
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[]], [[]])], [gpuport_symver_ignored=yes],
    [gpuport_symver_ignored=no])
  cat >conftest.map <<_GPUPORT_MAP
GPUPORT_CONFTEST_1.0 {
    global: gpuport_conftest_*;
    local: *;
};
GPUPORT_CONFTEST_1.1 {
    global: gpuport_conftest_new;
} GPUPORT_CONFTEST_1.0;
_GPUPORT_MAP
  AS_IF([test "x$gpuport_symver_ignored" = xno],
    [AC_LINK_IFELSE([AC_LANG_PROGRAM([[int gpuport_conftest_new(void) { return 0; }]],
                                     [[return gpuport_conftest_new();]])],
       [gpuport_have_symver=yes])])
  rm -f conftest.map
  LDFLAGS=$gpuport_save_LDFLAGS
  AC_MSG_RESULT([$gpuport_have_symver])
  AS_IF([test "x$enable_symbol_versions$gpuport_have_symver" = xyesno],
    [AC_MSG_ERROR([--enable-symbol-versions: the linker does not apply a version script (-Wl,--version-script); configure without it to build unversioned libraries])])
])
AM_CONDITIONAL([HAVE_SYMVER], [test "x$gpuport_have_symver" = xyes])
AS_IF([test "x$gpuport_have_symver" = xyes],
  [AC_DEFINE([GPUPORT_HAVE_SYMVER], [1], [the libraries' exports carry symbol versions])],
  [AC_DEFINE([GPUPORT_HAVE_SYMVER], [0], [the libraries' exports carry symbol versions])])
])
