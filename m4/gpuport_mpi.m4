dnl gpuport_mpi.m4 -- optional MPI (bootstrap library mpi/, MPI tests, tools).
dnl
dnl Flags come from the mpicc wrapper so that only the targets that include
dnl mpi.h see them; the build itself uses $CC.
dnl
dnl GPUPORT_CHECK_MPI sets and substitutes
dnl   MPI_CFLAGS MPI_LIBS MPICC MPIRUN MPIRUN_FLAGS MPIRUN_ROOT_FLAGS MPI_IMPL
dnl and defines GPUPORT_HAVE_MPI 0|1, AM_CONDITIONAL HAVE_MPI.
dnl MPIRUN_ROOT_FLAGS holds the launcher's run-as-root option; test/mpi/mpirun.sh
dnl adds it only when it runs as uid 0.

AC_DEFUN([GPUPORT_CHECK_MPI], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@],
    [MPI installation root (DIR/bin/mpicc); default: guess mpicc on PATH])],
  [], [with_mpi=guess])
AC_ARG_VAR([MPICC], [MPI C compiler wrapper used to query MPI flags (default: mpicc)])
AC_ARG_VAR([MPIRUN], [MPI launcher for tests (default: mpirun or mpiexec next to mpicc)])
AC_ARG_VAR([MPIRUN_FLAGS], [extra launcher flags for tests (default for Open MPI: --oversubscribe --bind-to none)])

gpuport_have_mpi=no
gpuport_mpi_why=
MPI_CFLAGS=
MPI_LIBS=
MPI_IMPL=
MPIRUN_ROOT_FLAGS=

AS_IF([test "x$with_mpi" != xno], [
  AS_CASE([$with_mpi],
    [yes|guess], [gpuport_mpi_path=$PATH],
    [gpuport_mpi_path=$with_mpi/bin])
  AS_IF([test -z "$MPICC"],
    [AC_PATH_PROGS([MPICC], [mpicc mpigcc], [], [$gpuport_mpi_path])])
  AS_IF([test -z "$MPICC"],
    [gpuport_mpi_why=" no mpicc in $gpuport_mpi_path;"],
    [
    AC_MSG_CHECKING([MPI compile flags from $MPICC])
    dnl Open MPI: --showme:compile/link; MPICH and derivatives: -show, split by option kind.
    AS_IF([gpuport_mpi_c=`$MPICC --showme:compile 2>/dev/null` &&
           gpuport_mpi_l=`$MPICC --showme:link 2>/dev/null`],
      [MPI_CFLAGS=$gpuport_mpi_c
       MPI_LIBS=$gpuport_mpi_l],
      [AS_IF([gpuport_mpi_show=`$MPICC -show 2>/dev/null`],
        [set dummy $gpuport_mpi_show
         shift 2
         for gpuport_t in "$[@]"; do
           AS_CASE([$gpuport_t],
             [-I*|-D*|-pthread|-isystem*], [MPI_CFLAGS="$MPI_CFLAGS $gpuport_t"],
             [-L*|-l*|-Wl,*|-Xlinker*], [MPI_LIBS="$MPI_LIBS $gpuport_t"],
             [])
         done
         MPI_LIBS=`echo $MPI_LIBS`
         MPI_CFLAGS=`echo $MPI_CFLAGS`],
        [gpuport_mpi_why=" $MPICC answers neither --showme:compile nor -show;"])])
    AC_MSG_RESULT([${MPI_CFLAGS:-none}])
    AC_MSG_CHECKING([MPI link flags from $MPICC])
    AC_MSG_RESULT([${MPI_LIBS:-none}])

    AS_IF([test -z "$gpuport_mpi_why"], [
      AC_MSG_CHECKING([whether an MPI program links with those flags])
      gpuport_save_CFLAGS=$CFLAGS
      gpuport_save_LIBS=$LIBS
      CFLAGS="$CFLAGS $MPI_CFLAGS"
      LIBS="$MPI_LIBS $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                      [[MPI_Comm c; MPI_Init(0, 0); MPI_Comm_dup(MPI_COMM_WORLD, &c); MPI_Finalize();]])],
        [AC_MSG_RESULT([yes])
         gpuport_have_mpi=yes],
        [AC_MSG_RESULT([no])
         gpuport_mpi_why=" a test program does not link with MPI_CFLAGS=$MPI_CFLAGS MPI_LIBS=$MPI_LIBS (see config.log);"])
      CFLAGS=$gpuport_save_CFLAGS
      LIBS=$gpuport_save_LIBS
    ])
  ])

  AS_IF([test "x$gpuport_have_mpi" = xyes], [
    gpuport_mpicc_dir=`AS_DIRNAME(["$MPICC"])`
    AS_IF([test -z "$MPIRUN"],
      [AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [], [$gpuport_mpicc_dir$PATH_SEPARATOR$PATH])])
    AS_IF([test -z "$MPIRUN"], [
      gpuport_have_mpi=no
      gpuport_mpi_why=" no mpirun or mpiexec next to $MPICC or on PATH;"])
  ])

  AS_IF([test "x$gpuport_have_mpi" = xyes], [
    AC_MSG_CHECKING([which MPI launcher $MPIRUN is])
    gpuport_mpirun_v=`$MPIRUN --version 2>&1 </dev/null`
    AS_CASE([$gpuport_mpirun_v],
      [*"Open MPI"*|*OpenRTE*|*PRRTE*|*prterun*], [MPI_IMPL=openmpi],
      [*HYDRA*|*MPICH*|*Intel*], [MPI_IMPL=mpich],
      [MPI_IMPL=unknown])
    AC_MSG_RESULT([$MPI_IMPL])
    AS_IF([test "x$MPI_IMPL" = xopenmpi], [
      dnl Open MPI binds each rank to one core by default; a gpuport rank runs
      dnl three threads (application, proxy, flusher), which then time-slice
      dnl on that core: 10 ms per ping-pong round trip measured on an H200 pair.
      AS_IF([test "x${MPIRUN_FLAGS+set}" != xset], [MPIRUN_FLAGS="--oversubscribe --bind-to none"])
      MPIRUN_ROOT_FLAGS=--allow-run-as-root])
  ])
])

AS_IF([test "x$gpuport_have_mpi" = xno], [
  AS_CASE([$with_mpi],
    [no|guess], [],
    [AC_MSG_ERROR([MPI was requested (--with-mpi=$with_mpi) but cannot be used:$gpuport_mpi_why
      install an MPI (Debian: openmpi-bin libopenmpi-dev), set MPICC=/path/to/mpicc,
      or use --without-mpi])])
  MPI_CFLAGS=
  MPI_LIBS=
  MPI_IMPL=
  MPIRUN_ROOT_FLAGS=
])

AS_IF([test "x$gpuport_have_mpi" = xyes], [gpuport_have_mpi_num=1], [gpuport_have_mpi_num=0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_MPI], [$gpuport_have_mpi_num],
  [1 when the MPI bootstrap is built, else 0])
AM_CONDITIONAL([HAVE_MPI], [test "x$gpuport_have_mpi" = xyes])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([MPI_IMPL])
AC_SUBST([MPICC])
AC_SUBST([MPIRUN])
AC_SUBST([MPIRUN_FLAGS])
AC_SUBST([MPIRUN_ROOT_FLAGS])
])
