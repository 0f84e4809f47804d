dnl gpuport_pkgconfig.m4 -- what the installed gpuport.pc and gpuport-mpi.pc say.
dnl
dnl GPUPORT_PKGCONFIG, after GPUPORT_CHECK_HWLOC and GPUPORT_CHECK_MPI, sets
dnl and substitutes
dnl   PC_REQUIRES_PRIVATE  "hwloc >= 2.0" where hwloc's flags came from its
dnl                        hwloc.pc (pkg-config then adds hwloc's own static
dnl                        needs), else empty
dnl   PC_LIBS_PRIVATE      the rest of what a static link of libgpuport.a
dnl                        needs: $HWLOC_LIBS where there is no hwloc.pc to
dnl                        name, threads and dlopen. libcuda.so.1 and
dnl                        libibverbs.so.1 are loaded at run time: never
dnl                        named (`nm -u libgpuport.a` lists no cu* or ibv_*)
dnl   PC_MPI_LIBS_PRIVATE  $MPI_LIBS, for gpuport-mpi.pc
dnl   PC_REQUIRES, PC_LIBS, PC_MPI_LIBS  the three above, moved here (and
dnl                        those emptied) with --disable-shared, where the
dnl                        plain `pkg-config --libs` links the .a files
dnl   GPUPORT_ENABLE_SHARED, GPUPORT_ENABLE_STATIC  yes|no, for installcheck
dnl                        and the CMake package
dnl   GPUPORT_SIZEOF_VOID_P  sizeof(void *): gpuport-config-version.cmake
dnl                        refuses a project of another pointer size
dnl and takes --with-pkgconfigdir=DIR (default: LIBDIR/pkgconfig) and
dnl --with-cmakeconfigdir=DIR (default: LIBDIR/cmake/gpuport), where the
dnl CMake package (cmake/gpuport-config*.cmake.in, made by Makefile.am) goes.

AC_DEFUN([GPUPORT_PKGCONFIG], [
AC_ARG_WITH([pkgconfigdir],
  [AS_HELP_STRING([--with-pkgconfigdir=DIR],
    [where gpuport.pc and gpuport-mpi.pc are installed; default: LIBDIR/pkgconfig])],
  [], [with_pkgconfigdir='${libdir}/pkgconfig'])
AS_CASE([$with_pkgconfigdir],
  [yes|no|""], [AC_MSG_ERROR([--with-pkgconfigdir needs a directory (default: LIBDIR/pkgconfig)])])
pkgconfigdir=$with_pkgconfigdir
AC_SUBST([pkgconfigdir])
AC_ARG_WITH([cmakeconfigdir],
  [AS_HELP_STRING([--with-cmakeconfigdir=DIR],
    [where gpuport-config.cmake and gpuport-config-version.cmake are installed;
     default: LIBDIR/cmake/gpuport])],
  [], [with_cmakeconfigdir='${libdir}/cmake/gpuport'])
AS_CASE([$with_cmakeconfigdir],
  [yes|no|""], [AC_MSG_ERROR([--with-cmakeconfigdir needs a directory (default: LIBDIR/cmake/gpuport)])])
cmakeconfigdir=$with_cmakeconfigdir
AC_SUBST([cmakeconfigdir])
AC_COMPUTE_INT([GPUPORT_SIZEOF_VOID_P], [(long) sizeof(void *)], [],
  [AC_MSG_ERROR([cannot compute sizeof(void *) for the CMake package's version file])])
AC_SUBST([GPUPORT_SIZEOF_VOID_P])

AC_MSG_CHECKING([how gpuport.pc names hwloc])
PC_REQUIRES_PRIVATE=
PC_LIBS_PRIVATE=
dnl Only hwloc found through pkg-config, from the default search path, is
dnl named as a module: the same lookup then works for gpuport.pc's users.
AS_IF([test -n "$PKG_CONFIG" && $PKG_CONFIG --exists hwloc 2>/dev/null &&
       test "x`$PKG_CONFIG --libs hwloc 2>/dev/null`" = "x$HWLOC_LIBS"],
  [PC_REQUIRES_PRIVATE="hwloc >= 2.0"
   AC_MSG_RESULT([Requires.private: $PC_REQUIRES_PRIVATE])],
  [PC_LIBS_PRIVATE=$HWLOC_LIBS
   AC_MSG_RESULT([Libs.private: $HWLOC_LIBS (no hwloc.pc behind these flags)])])
PC_LIBS_PRIVATE=`echo $PC_LIBS_PRIVATE $PTHREAD_LIBS $DL_LIBS`
PC_MPI_LIBS_PRIVATE=$MPI_LIBS
dnl Without shared libraries -lgpuport is libgpuport.a, so the plain
dnl `pkg-config --libs` must name what it needs too: the private fields
dnl become public ones.
PC_REQUIRES=
PC_LIBS=
PC_MPI_LIBS=
AS_IF([test "x$enable_shared" = xno],
  [PC_REQUIRES=$PC_REQUIRES_PRIVATE PC_REQUIRES_PRIVATE=
   PC_LIBS=$PC_LIBS_PRIVATE PC_LIBS_PRIVATE=
   PC_MPI_LIBS=$PC_MPI_LIBS_PRIVATE PC_MPI_LIBS_PRIVATE=])
AC_SUBST([PC_REQUIRES])
AC_SUBST([PC_REQUIRES_PRIVATE])
AC_SUBST([PC_LIBS])
AC_SUBST([PC_LIBS_PRIVATE])
AC_SUBST([PC_MPI_LIBS])
AC_SUBST([PC_MPI_LIBS_PRIVATE])
GPUPORT_ENABLE_SHARED=$enable_shared
GPUPORT_ENABLE_STATIC=$enable_static
AC_SUBST([GPUPORT_ENABLE_SHARED])
AC_SUBST([GPUPORT_ENABLE_STATIC])
])
