dnl gpuport_ibverbs.m4 -- optional InfiniBand verbs (the ib transport).
dnl
dnl Only the headers are needed: the library dlopens libibverbs.so.1 at run
dnl time (src/transport/ib/ib_verbs.c), so it loads where rdma-core is not
dnl installed and ib alone reports itself unavailable. Nothing links -libverbs.
dnl
dnl GPUPORT_CHECK_IBVERBS sets and substitutes IBVERBS_CFLAGS and defines
dnl GPUPORT_HAVE_IBVERBS 0|1, GPUPORT_HAVE_IBV_DMABUF 0|1 (verbs.h declares
dnl ibv_reg_dmabuf_mr, to register GPU memory without peer-memory modules;
dnl the library loaded at run time may still lack it) and AM_CONDITIONAL
dnl HAVE_IBVERBS.

AC_DEFUN([GPUPORT_CHECK_IBVERBS], [
AC_ARG_WITH([ibverbs],
  [AS_HELP_STRING([--with-ibverbs@<:@=DIR@:>@],
    [rdma-core/libibverbs root (DIR/include/infiniband/verbs.h); default: guess])],
  [], [with_ibverbs=guess])

gpuport_have_ibverbs=no
gpuport_have_ibv_dmabuf=no
IBVERBS_CFLAGS=

AS_IF([test "x$with_ibverbs" != xno], [
  AS_CASE([$with_ibverbs],
    [yes|guess], [],
    [AS_IF([test ! -f "$with_ibverbs/include/infiniband/verbs.h"],
       [AC_MSG_ERROR([--with-ibverbs=$with_ibverbs: $with_ibverbs/include/infiniband/verbs.h does not exist;
         give the root of an rdma-core installation, install the Debian package libibverbs-dev,
         or use --without-ibverbs])])
     dnl System prefixes are already searched.
     AS_CASE([$with_ibverbs], [/usr|/usr/|/], [],
       [IBVERBS_CFLAGS="-I$with_ibverbs/include"])])
  gpuport_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $IBVERBS_CFLAGS"
  dnl The prototypes the run-time table is typed from (ib_verbs.h): a
  dnl function named without a call is an error where it is not declared.
  AC_MSG_CHECKING([for infiniband/verbs.h with ibv_query_gid_ex])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <infiniband/verbs.h>]],
                                     [[(void)ibv_get_device_list; (void)_ibv_query_gid_ex;]])],
    [gpuport_have_ibverbs=yes], [])
  AC_MSG_RESULT([$gpuport_have_ibverbs])
  AS_IF([test "x$gpuport_have_ibverbs" = xyes], [
    AC_MSG_CHECKING([whether verbs.h declares ibv_reg_dmabuf_mr])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <infiniband/verbs.h>]],
                                       [[(void)ibv_reg_dmabuf_mr;]])],
      [gpuport_have_ibv_dmabuf=yes], [])
    AC_MSG_RESULT([$gpuport_have_ibv_dmabuf])])
  CPPFLAGS=$gpuport_save_CPPFLAGS
])

AS_IF([test "x$gpuport_have_ibverbs" = xno], [
  AS_CASE([$with_ibverbs],
    [no|guess], [],
    [AC_MSG_ERROR([ibverbs was requested (--with-ibverbs=$with_ibverbs) but infiniband/verbs.h
      cannot be used (see config.log); install the Debian package libibverbs-dev,
      or use --without-ibverbs])])
  IBVERBS_CFLAGS=
])

AS_IF([test "x$gpuport_have_ibverbs" = xyes], [gpuport_have_ibverbs_num=1], [gpuport_have_ibverbs_num=0])
AS_IF([test "x$gpuport_have_ibv_dmabuf" = xyes], [gpuport_have_ibv_dmabuf_num=1], [gpuport_have_ibv_dmabuf_num=0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_IBVERBS], [$gpuport_have_ibverbs_num],
  [1 when the InfiniBand verbs transport can be built, else 0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_IBV_DMABUF], [$gpuport_have_ibv_dmabuf_num],
  [1 when verbs.h declares ibv_reg_dmabuf_mr, else 0])
AM_CONDITIONAL([HAVE_IBVERBS], [test "x$gpuport_have_ibverbs" = xyes])
AC_SUBST([IBVERBS_CFLAGS])
])
