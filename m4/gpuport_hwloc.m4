dnl gpuport_hwloc.m4 -- hwloc (required: binds the proxy and flusher threads
dnl near the GPU and NIC).
dnl
dnl GPUPORT_CHECK_HWLOC sets and substitutes HWLOC_CFLAGS HWLOC_LIBS
dnl HWLOC_VERSION_STR, defines GPUPORT_HAVE_HWLOC 1 and AM_CONDITIONAL
dnl HAVE_HWLOC (always true: configure stops without hwloc).

AC_DEFUN([GPUPORT_CHECK_HWLOC], [
AC_ARG_WITH([hwloc],
  [AS_HELP_STRING([--with-hwloc@<:@=DIR@:>@],
    [hwloc installation root (DIR/include/hwloc.h, DIR/lib*/libhwloc); required;
     default: guess with pkg-config, then the compiler's default paths])],
  [], [with_hwloc=guess])
AC_ARG_VAR([HWLOC_CFLAGS], [C compiler flags for hwloc, overriding detection])
AC_ARG_VAR([HWLOC_LIBS], [linker flags for hwloc, overriding detection])

AS_IF([test "x$with_hwloc" = xno],
  [AC_MSG_ERROR([hwloc is required and cannot be disabled (--without-hwloc);
    install it (Debian: apt-get install libhwloc-dev) or give --with-hwloc=DIR])])

gpuport_have_hwloc=no
HWLOC_VERSION_STR=
gpuport_hwloc_pc_path=
gpuport_hwloc_user_flags=no
AS_IF([test -n "$HWLOC_CFLAGS$HWLOC_LIBS"], [gpuport_hwloc_user_flags=yes])

AS_CASE([$with_hwloc],
  [yes|guess], [],
  [AS_IF([test ! -f "$with_hwloc/include/hwloc.h"],
     [AC_MSG_ERROR([--with-hwloc=$with_hwloc: $with_hwloc/include/hwloc.h does not exist;
       give the root of an hwloc installation, or install the Debian package libhwloc-dev])])
   gpuport_hwloc_libdir=
   for gpuport_l in lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu lib; do
     AS_IF([ls "$with_hwloc/$gpuport_l"/libhwloc.* >/dev/null 2>&1],
       [gpuport_hwloc_libdir=$with_hwloc/$gpuport_l; break])
   done
   AS_IF([test -n "$gpuport_hwloc_libdir" && test -f "$gpuport_hwloc_libdir/pkgconfig/hwloc.pc"],
     [gpuport_hwloc_pc_path=$gpuport_hwloc_libdir/pkgconfig])
   AS_IF([test "x$gpuport_hwloc_user_flags" = xno], [
     HWLOC_CFLAGS="-I$with_hwloc/include"
     HWLOC_LIBS=-lhwloc
     dnl System prefixes are already searched; -L there could shadow other libraries.
     AS_CASE([$with_hwloc], [/usr|/usr/|/], [HWLOC_CFLAGS=],
       [AS_IF([test -n "$gpuport_hwloc_libdir"],
         [HWLOC_LIBS="-L$gpuport_hwloc_libdir -lhwloc"])])])])

AC_PATH_TOOL([PKG_CONFIG], [pkg-config])
AS_CASE([$with_hwloc], [yes|guess], [gpuport_hwloc_try_pc=yes], [gpuport_hwloc_try_pc=no])
AS_IF([test "x$gpuport_hwloc_user_flags$gpuport_hwloc_try_pc" = xnoyes && test -n "$PKG_CONFIG"], [
  AC_MSG_CHECKING([for hwloc with pkg-config])
  AS_IF([$PKG_CONFIG --exists hwloc 2>&AS_MESSAGE_LOG_FD],
    [HWLOC_CFLAGS=`$PKG_CONFIG --cflags hwloc`
     HWLOC_LIBS=`$PKG_CONFIG --libs hwloc`
     AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])])])
AS_IF([test -z "$HWLOC_LIBS"], [HWLOC_LIBS=-lhwloc])

gpuport_save_CPPFLAGS=$CPPFLAGS
gpuport_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
LIBS="$HWLOC_LIBS $LIBS"
AC_MSG_CHECKING([for hwloc.h and hwloc_topology_init])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]],
                                [[hwloc_topology_t t; hwloc_topology_init(&t); hwloc_topology_destroy(t);]])],
  [gpuport_have_hwloc=yes], [])
AC_MSG_RESULT([$gpuport_have_hwloc])
AS_IF([test "x$gpuport_have_hwloc" = xno],
  [AC_MSG_ERROR([hwloc is required but hwloc.h / libhwloc cannot be used
    (HWLOC_CFLAGS=$HWLOC_CFLAGS HWLOC_LIBS=$HWLOC_LIBS; see config.log);
    install the Debian package libhwloc-dev, or give --with-hwloc=DIR])])

AC_MSG_CHECKING([for hwloc API 2.x])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]],
                                   [[#if HWLOC_API_VERSION < 0x00020000
#error hwloc 1.x
#endif]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([hwloc 2.0 or newer is required (found an older hwloc.h; Debian: libhwloc-dev from bookworm or later)])])

AS_IF([test -n "$PKG_CONFIG"], [
  AS_IF([test -n "$gpuport_hwloc_pc_path"],
    [HWLOC_VERSION_STR=`PKG_CONFIG_PATH="$gpuport_hwloc_pc_path" $PKG_CONFIG --modversion hwloc 2>/dev/null`],
    [AS_CASE([$with_hwloc], [yes|guess],
      [HWLOC_VERSION_STR=`$PKG_CONFIG --modversion hwloc 2>/dev/null`])])])
AS_IF([test -z "$HWLOC_VERSION_STR"], [
  AC_COMPUTE_INT([gpuport_hwloc_api], [HWLOC_API_VERSION], [[#include <hwloc.h>]], [gpuport_hwloc_api=0])
  HWLOC_VERSION_STR=`printf 'API %d.%d' $(( gpuport_hwloc_api >> 16 )) $(( (gpuport_hwloc_api >> 8) & 255 ))`])
CPPFLAGS=$gpuport_save_CPPFLAGS
LIBS=$gpuport_save_LIBS

AC_DEFINE([GPUPORT_HAVE_HWLOC], [1], [always 1: hwloc is required])
AM_CONDITIONAL([HAVE_HWLOC], [test "x$gpuport_have_hwloc" = xyes])
AC_SUBST([HWLOC_CFLAGS])
AC_SUBST([HWLOC_LIBS])
AC_SUBST([HWLOC_VERSION_STR])
])
