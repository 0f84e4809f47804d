dnl gpuport_ibverbs.m4 -- optional InfiniBand verbs (the ib transport).
dnl
dnl GPUPORT_CHECK_IBVERBS sets and substitutes IBVERBS_CFLAGS IBVERBS_LIBS and
dnl defines GPUPORT_HAVE_IBVERBS 0|1, GPUPORT_HAVE_IBV_DMABUF 0|1
dnl (ibv_reg_dmabuf_mr, to register GPU memory without peer-memory modules)
dnl and AM_CONDITIONAL HAVE_IBVERBS.

AC_DEFUN([GPUPORT_CHECK_IBVERBS], [
AC_ARG_WITH([ibverbs],
  [AS_HELP_STRING([--with-ibverbs@<:@=DIR@:>@],
    [rdma-core/libibverbs root (DIR/include/infiniband/verbs.h); default: guess])],
  [], [with_ibverbs=guess])

gpuport_have_ibverbs=no
gpuport_have_ibv_dmabuf=no
IBVERBS_CFLAGS=
IBVERBS_LIBS=

AS_IF([test "x$with_ibverbs" != xno], [
  AS_CASE([$with_ibverbs],
    [yes|guess], [IBVERBS_LIBS=-libverbs],
    [AS_IF([test ! -f "$with_ibverbs/include/infiniband/verbs.h"],
       [AC_MSG_ERROR([--with-ibverbs=$with_ibverbs: $with_ibverbs/include/infiniband/verbs.h does not exist;
         give the root of an rdma-core installation, install the Debian package libibverbs-dev,
         or use --without-ibverbs])])
     gpuport_ibv_libdir=
     for gpuport_l in lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu lib; do
       AS_IF([ls "$with_ibverbs/$gpuport_l"/libibverbs.* >/dev/null 2>&1],
         [gpuport_ibv_libdir=$with_ibverbs/$gpuport_l; break])
     done
     IBVERBS_CFLAGS="-I$with_ibverbs/include"
     IBVERBS_LIBS=-libverbs
     dnl System prefixes are already searched; -L there could shadow other libraries.
     AS_CASE([$with_ibverbs], [/usr|/usr/|/], [IBVERBS_CFLAGS=],
       [AS_IF([test -n "$gpuport_ibv_libdir"],
         [IBVERBS_LIBS="-L$gpuport_ibv_libdir -libverbs"])])])
  gpuport_save_CPPFLAGS=$CPPFLAGS
  gpuport_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $IBVERBS_CFLAGS"
  LIBS="$IBVERBS_LIBS $LIBS"
  AC_MSG_CHECKING([for infiniband/verbs.h and -libverbs])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <infiniband/verbs.h>]],
                                  [[int n; struct ibv_device **l = ibv_get_device_list(&n); ibv_free_device_list(l);]])],
    [gpuport_have_ibverbs=yes], [])
  AC_MSG_RESULT([$gpuport_have_ibverbs])
  AS_IF([test "x$gpuport_have_ibverbs" = xyes], [
    AC_MSG_CHECKING([for ibv_reg_dmabuf_mr])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <infiniband/verbs.h>]],
                                    [[struct ibv_mr *m = ibv_reg_dmabuf_mr(0, 0, 0, 0, -1, 0); (void)m;]])],
      [gpuport_have_ibv_dmabuf=yes], [])
    AC_MSG_RESULT([$gpuport_have_ibv_dmabuf])])
  CPPFLAGS=$gpuport_save_CPPFLAGS
  LIBS=$gpuport_save_LIBS
])

AS_IF([test "x$gpuport_have_ibverbs" = xno], [
  AS_CASE([$with_ibverbs],
    [no|guess], [],
    [AC_MSG_ERROR([ibverbs was requested (--with-ibverbs=$with_ibverbs) but infiniband/verbs.h or
      libibverbs cannot be used (see config.log); install the Debian package libibverbs-dev,
      or use --without-ibverbs])])
  IBVERBS_CFLAGS=
  IBVERBS_LIBS=
])

AS_IF([test "x$gpuport_have_ibverbs" = xyes], [gpuport_have_ibverbs_num=1], [gpuport_have_ibverbs_num=0])
AS_IF([test "x$gpuport_have_ibv_dmabuf" = xyes], [gpuport_have_ibv_dmabuf_num=1], [gpuport_have_ibv_dmabuf_num=0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_IBVERBS], [$gpuport_have_ibverbs_num],
  [1 when the InfiniBand verbs transport can be built, else 0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_IBV_DMABUF], [$gpuport_have_ibv_dmabuf_num],
  [1 when libibverbs has ibv_reg_dmabuf_mr, else 0])
AM_CONDITIONAL([HAVE_IBVERBS], [test "x$gpuport_have_ibverbs" = xyes])
AC_SUBST([IBVERBS_CFLAGS])
AC_SUBST([IBVERBS_LIBS])
])
