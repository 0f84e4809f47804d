dnl gpuport_mpi.m4 -- optional MPI (bootstrap library mpi/, MPI tests, tools).
dnl
dnl Open MPI and MPICH (and MPICH's ABI family) are both supported; Debian
dnl installs them side by side as mpicc.openmpi and mpicc.mpich, with mpicc
dnl an alternative that names one of them. The wrapper is found (or given
dnl as MPICC), must compile and link a test program, and tells its family
dnl by the macros of its mpi.h; the launcher is then chosen to match it.
dnl Flags come from the wrapper so that only the targets that include mpi.h
dnl see them; the build itself uses $CC.
dnl
dnl GPUPORT_CHECK_MPI sets and substitutes
dnl   MPI_CFLAGS MPI_LIBS MPICC MPIRUN MPIRUN_FLAGS MPIRUN_ROOT_FLAGS
dnl   MPI_IMPL (openmpi|mpich|other) MPI_IMPL_VERSION (the wrapper's mpi.h)
dnl   MPI_OTHER_CFLAGS MPI_OTHER_LIBS MPI_OTHER_IMPL: a second MPI of the
dnl     other family, found only for test/mpi/mismatch.sh
dnl and defines GPUPORT_HAVE_MPI 0|1, AM_CONDITIONAL HAVE_MPI, HAVE_MPI_OTHER.
dnl MPIRUN_ROOT_FLAGS holds the launcher's run-as-root option; test/mpi/mpirun.sh
dnl adds it only when it runs as uid 0.

dnl _GPUPORT_MPI_PROBE(WRAPPER-VARIABLE, PREFIX)
dnl Tries the wrapper in $WRAPPER-VARIABLE. On success PREFIX_why is empty and
dnl PREFIX_family (openmpi|mpich|other), PREFIX_version, PREFIX_cflags and
dnl PREFIX_libs are set; otherwise PREFIX_why says what failed.
AC_DEFUN([_GPUPORT_MPI_PROBE], [
$2_why=
$2_family=
$2_version=
$2_cflags=
$2_libs=
set dummy $$1
AS_IF([test $[#] -lt 2 || ! command -v "$[2]" >/dev/null 2>&1],
  [$2_why="no program '$[2]'"])

dnl The wrapper itself, as a user would run it.
AS_IF([test -z "$$2_why"], [
  AC_MSG_CHECKING([whether $$1 compiles and links an MPI program])
  gpuport_save_CC=$CC
  CC=$$1
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                  [[MPI_Comm c; MPI_Init(0, 0); MPI_Comm_dup(MPI_COMM_WORLD, &c); MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     $2_why="$$1 does not compile and link an MPI test program (see config.log)"])

  dnl The family from the wrapper's own mpi.h, not from a launcher's banner.
  AS_IF([test -z "$$2_why"], [
    AC_MSG_CHECKING([which MPI $$1 compiles for])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not Open MPI
#endif]], [[]])],
      [$2_family=openmpi],
      [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_NUMVERSION
#error not MPICH
#endif]], [[]])],
        [$2_family=mpich],
        [$2_family=other])])
    AS_CASE([$$2_family],
      [openmpi], [
        AC_COMPUTE_INT([gpuport_v1], [OMPI_MAJOR_VERSION], [[#include <mpi.h>]], [gpuport_v1=?])
        AC_COMPUTE_INT([gpuport_v2], [OMPI_MINOR_VERSION], [[#include <mpi.h>]], [gpuport_v2=?])
        AC_COMPUTE_INT([gpuport_v3], [OMPI_RELEASE_VERSION], [[#include <mpi.h>]], [gpuport_v3=?])
        $2_version=$gpuport_v1.$gpuport_v2.$gpuport_v3],
      [mpich], [
        dnl MPICH_NUMVERSION is MAJOR*10^7 + MINOR*10^5 + REVISION*10^3 + release type and patch
        AC_COMPUTE_INT([gpuport_v1], [MPICH_NUMVERSION], [[#include <mpi.h>]], [gpuport_v1=])
        AS_IF([test -n "$gpuport_v1"],
          [$2_version=`expr $gpuport_v1 / 10000000`.`expr $gpuport_v1 / 100000 % 100`.`expr $gpuport_v1 / 1000 % 100`],
          [$2_version=?])],
      [
        AC_COMPUTE_INT([gpuport_v1], [MPI_VERSION], [[#include <mpi.h>]], [gpuport_v1=?])
        AC_COMPUTE_INT([gpuport_v2], [MPI_SUBVERSION], [[#include <mpi.h>]], [gpuport_v2=?])
        $2_version="MPI-$gpuport_v1.$gpuport_v2"])
    AC_MSG_RESULT([$$2_family $$2_version])
  ])
  CC=$gpuport_save_CC
])

dnl Flags for $CC: Open MPI answers --showme:compile/link; MPICH and its
dnl family answer -show, a command line split here by option kind.
AS_IF([test -z "$$2_why"], [
  AC_MSG_CHECKING([MPI compile flags from $$1])
  gpuport_mpi_got=no
  AS_IF([test "x$$2_family" != xmpich],
    [AS_IF([gpuport_mpi_c=`$$1 --showme:compile 2>/dev/null` &&
            gpuport_mpi_l=`$$1 --showme:link 2>/dev/null`],
       [$2_cflags=$gpuport_mpi_c
        $2_libs=$gpuport_mpi_l
        gpuport_mpi_got=yes])])
  AS_IF([test "x$gpuport_mpi_got" = xno && test "x$$2_family" != xopenmpi],
    [AS_IF([gpuport_mpi_show=`$$1 -show 2>/dev/null`],
      [set dummy $gpuport_mpi_show
       shift 2
       for gpuport_t in "$[@]"; do
         AS_CASE([$gpuport_t],
           [-I*|-D*|-pthread|-isystem*], [$2_cflags="$$2_cflags $gpuport_t"],
           [-L*|-l*|-Wl,*|-Xlinker*], [$2_libs="$$2_libs $gpuport_t"],
           [])
       done
       $2_libs=`echo $$2_libs`
       $2_cflags=`echo $$2_cflags`
       gpuport_mpi_got=yes])])
  AS_IF([test "x$gpuport_mpi_got" = xno],
    [AS_CASE([$$2_family],
       [openmpi], [$2_why="$$1 (Open MPI) does not answer --showme:compile and --showme:link"],
       [mpich], [$2_why="$$1 (MPICH) does not answer -show"],
       [$2_why="$$1 answers neither --showme:compile nor -show"])])
  AC_MSG_RESULT([${$2_cflags:-none}])
  AC_MSG_CHECKING([MPI link flags from $$1])
  AC_MSG_RESULT([${$2_libs:-none}])
])

AS_IF([test -z "$$2_why"], [
  AC_MSG_CHECKING([whether $CC links an MPI program with those flags])
  gpuport_save_CFLAGS=$CFLAGS
  gpuport_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $$2_cflags"
  LIBS="$$2_libs $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                  [[MPI_Comm c; MPI_Init(0, 0); MPI_Comm_dup(MPI_COMM_WORLD, &c); MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     $2_why="$CC does not link an MPI test program with the flags $$1 gives (MPI_CFLAGS=$$2_cflags MPI_LIBS=$$2_libs; see config.log)"])
  CFLAGS=$gpuport_save_CFLAGS
  LIBS=$gpuport_save_LIBS
])
])

dnl _GPUPORT_MPI_LAUNCHER_FAMILY(PROGRAM): sets gpuport_mpi_lfam to openmpi,
dnl mpich or unknown from PROGRAM --version (a second opinion only: some
dnl launchers answer nothing useful, and that says nothing about the wrapper).
AC_DEFUN([_GPUPORT_MPI_LAUNCHER_FAMILY], [
gpuport_mpirun_v=`$1 --version 2>&1 </dev/null`
AS_CASE([$gpuport_mpirun_v],
  [*"Open MPI"*|*OpenRTE*|*PRRTE*|*prterun*], [gpuport_mpi_lfam=openmpi],
  [*HYDRA*|*MPICH*|*"Intel(R) MPI"*], [gpuport_mpi_lfam=mpich],
  [gpuport_mpi_lfam=unknown])
])

dnl _GPUPORT_MPI_NAME(VARIABLE, FAMILY): the family as people write it.
AC_DEFUN([_GPUPORT_MPI_NAME], [
AS_CASE([$2],
  [openmpi], [$1="Open MPI"],
  [mpich], [$1=MPICH],
  [$1="$2"])
])

AC_DEFUN([GPUPORT_CHECK_MPI], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@],
    [MPI installation root (Open MPI or MPICH: DIR/bin/mpicc, its mpirun or mpiexec beside it);
     default: guess mpicc, mpicc.openmpi, mpicc.mpich, mpigcc on PATH])],
  [], [with_mpi=guess])
AC_ARG_VAR([MPICC], [MPI C compiler wrapper (Open MPI or MPICH family); when set, it must work])
AC_ARG_VAR([MPIRUN], [MPI launcher for tests (default: the wrapper's family's launcher, next to it first)])
AC_ARG_VAR([MPIRUN_FLAGS], [extra launcher flags for tests (default: Open MPI --oversubscribe --bind-to none; MPICH -bind-to none)])
AC_ARG_VAR([MPICC_OTHER], [wrapper of the other MPI family, only for the mismatch test (default: mpicc.mpich or mpicc.openmpi)])

gpuport_have_mpi=no
gpuport_mpi_why=
MPI_CFLAGS=
MPI_LIBS=
MPI_IMPL=
MPI_IMPL_VERSION=
MPIRUN_ROOT_FLAGS=
gpuport_mpicc_user=$MPICC
gpuport_mpirun_user=$MPIRUN

dnl MPICC=, --with-mpi=yes and --with-mpi=DIR are requests: failing them stops configure.
AS_IF([test "x$with_mpi" = xno],
  [AS_IF([test -n "$gpuport_mpicc_user"],
     [AC_MSG_WARN([MPICC=$gpuport_mpicc_user is ignored: --without-mpi])])],
  [test -n "$gpuport_mpicc_user"],
  [gpuport_mpi_required="MPICC=$gpuport_mpicc_user"],
  [test "x$with_mpi" = xguess],
  [gpuport_mpi_required=],
  [gpuport_mpi_required="--with-mpi=$with_mpi"])

AS_IF([test "x$with_mpi" != xno], [
  AS_IF([test -n "$gpuport_mpicc_user"],
    [gpuport_mpi_wrappers=$gpuport_mpicc_user],
    [AS_CASE([$with_mpi],
      [yes|guess], [gpuport_mpi_path=$PATH],
      [gpuport_mpi_path=$with_mpi/bin])
     gpuport_mpi_wrappers=
     for gpuport_n in mpicc mpicc.openmpi mpicc.mpich mpigcc; do
       gpuport_save_IFS=$IFS
       IFS=$PATH_SEPARATOR
       for gpuport_d in $gpuport_mpi_path; do
         IFS=$gpuport_save_IFS
         test -n "$gpuport_d" || gpuport_d=.
         AS_IF([test -f "$gpuport_d/$gpuport_n" && test -x "$gpuport_d/$gpuport_n"],
           [gpuport_mpi_wrappers="$gpuport_mpi_wrappers $gpuport_d/$gpuport_n"; break])
       done
       IFS=$gpuport_save_IFS
     done
     AS_IF([test -z "$gpuport_mpi_wrappers"],
       [gpuport_mpi_why=" no mpicc, mpicc.openmpi, mpicc.mpich or mpigcc in $gpuport_mpi_path;"])])

  dnl The first wrapper that works; a given MPICC is the only candidate.
  for gpuport_w in $gpuport_mpi_wrappers; do
    AS_IF([test -n "$gpuport_mpicc_user"], [MPICC=$gpuport_mpicc_user], [MPICC=$gpuport_w])
    _GPUPORT_MPI_PROBE([MPICC], [gpuport_mp])
    AS_IF([test -z "$gpuport_mp_why"], [
      gpuport_have_mpi=yes
      MPI_IMPL=$gpuport_mp_family
      MPI_IMPL_VERSION=$gpuport_mp_version
      MPI_CFLAGS=$gpuport_mp_cflags
      MPI_LIBS=$gpuport_mp_libs
      break])
    gpuport_mpi_why="$gpuport_mpi_why $gpuport_mp_why;"
    AS_IF([test -n "$gpuport_mpicc_user"], [break])
  done
])

dnl A given MPICC that fails stops configure, --with-mpi or not.
AS_IF([test "x$gpuport_have_mpi" = xno && test -n "$gpuport_mpicc_user" && test "x$with_mpi" != xno],
  [AC_MSG_ERROR([MPICC=$gpuport_mpicc_user cannot be used:$gpuport_mpi_why
    set MPICC to a working Open MPI or MPICH wrapper (Debian: mpicc.openmpi, mpicc.mpich),
    unset it to let configure search, or use --without-mpi])])

dnl The launcher: one of the wrapper's family, next to the wrapper first.
AS_IF([test "x$gpuport_have_mpi" = xyes], [
  set dummy $MPICC
  gpuport_mpicc_path=`command -v "$[2]"`
  gpuport_mpicc_dir=`AS_DIRNAME(["$gpuport_mpicc_path"])`
  gpuport_mpicc_base=`basename "$gpuport_mpicc_path"`
  dnl mpicc.openmpi -> mpirun.openmpi, mpicc.mpich -> mpiexec.mpich
  gpuport_mpi_sfx=`echo "$gpuport_mpicc_base" | sed -n 's/^mpicc\(\..*\)$/\1/p'`
  AS_CASE([$MPI_IMPL],
    [openmpi], [gpuport_mpirun_names="mpirun$gpuport_mpi_sfx mpiexec$gpuport_mpi_sfx mpirun.openmpi mpiexec.openmpi mpirun mpiexec"],
    [mpich], [gpuport_mpirun_names="mpiexec$gpuport_mpi_sfx mpirun$gpuport_mpi_sfx mpiexec.mpich mpirun.mpich mpiexec.hydra mpiexec mpirun"],
    [gpuport_mpirun_names="mpirun$gpuport_mpi_sfx mpiexec$gpuport_mpi_sfx mpirun mpiexec"])
  gpuport_l=
  for gpuport_n in $gpuport_mpirun_names; do
    AS_CASE([" $gpuport_l "], [*" $gpuport_n "*], [], [gpuport_l="$gpuport_l $gpuport_n"])
  done
  gpuport_mpirun_names=`echo $gpuport_l`
  dnl An explicit --with-mpi=DIR keeps to DIR/bin: a launcher from elsewhere
  dnl may be another version of the family.
  AS_CASE([$with_mpi],
    [yes|guess], [gpuport_mpirun_dirs="$gpuport_mpicc_dir PATH"],
    [gpuport_mpirun_dirs=$gpuport_mpicc_dir])
  AS_IF([test -n "$gpuport_mpicc_user"], [gpuport_mpirun_dirs="$gpuport_mpicc_dir PATH"])

  AC_MSG_CHECKING([for an MPI launcher of $MPICC's family])
  gpuport_mpirun_skipped=
  gpuport_mpi_lfam=unknown
  AS_IF([test -n "$gpuport_mpirun_user"], [
    set dummy $gpuport_mpirun_user
    AS_IF([command -v "$[2]" >/dev/null 2>&1], [],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([MPIRUN=$gpuport_mpirun_user: no such program])])
    _GPUPORT_MPI_LAUNCHER_FAMILY([$gpuport_mpirun_user])
    AS_IF([test "x$gpuport_mpi_lfam" != xunknown && test "x$MPI_IMPL" != xother &&
           test "x$gpuport_mpi_lfam" != "x$MPI_IMPL"],
      [AC_MSG_RESULT([no])
       _GPUPORT_MPI_NAME([gpuport_mpi_lname], [$gpuport_mpi_lfam])
       _GPUPORT_MPI_NAME([gpuport_mpi_wname], [$MPI_IMPL])
       AC_MSG_ERROR([MPIRUN=$gpuport_mpirun_user is $gpuport_mpi_lname's launcher, but $MPICC compiles for $gpuport_mpi_wname: its programs would not start under it; set MPIRUN to $gpuport_mpi_wname's launcher, or unset it])])],
    [
    MPIRUN=
    for gpuport_d in $gpuport_mpirun_dirs; do
      for gpuport_n in $gpuport_mpirun_names; do
        AS_IF([test "x$gpuport_d" = xPATH],
          [gpuport_p=`command -v "$gpuport_n" 2>/dev/null` || gpuport_p=],
          [gpuport_p=$gpuport_d/$gpuport_n
           test -f "$gpuport_p" && test -x "$gpuport_p" || gpuport_p=])
        test -n "$gpuport_p" || continue
        _GPUPORT_MPI_LAUNCHER_FAMILY([$gpuport_p])
        AS_IF([test "x$gpuport_mpi_lfam" != xunknown && test "x$MPI_IMPL" != xother &&
               test "x$gpuport_mpi_lfam" != "x$MPI_IMPL"],
          [gpuport_mpirun_skipped="$gpuport_mpirun_skipped $gpuport_p ($gpuport_mpi_lfam)"
           continue])
        MPIRUN=$gpuport_p
        break
      done
      test -n "$MPIRUN" && break
    done])
  AS_IF([test -n "$MPIRUN"],
    [AS_IF([test "x$gpuport_mpi_lfam" = xunknown],
       [AC_MSG_RESULT([$MPIRUN (its --version names no family; taken for $MPI_IMPL's)])],
       [AC_MSG_RESULT([$MPIRUN])])],
    [AC_MSG_RESULT([no])
     gpuport_have_mpi=no
     _GPUPORT_MPI_NAME([gpuport_mpi_wname], [$MPI_IMPL])
     gpuport_mpi_why=" no $gpuport_mpi_wname launcher ($gpuport_mpirun_names) in $gpuport_mpirun_dirs${gpuport_mpirun_skipped:+; of another family:$gpuport_mpirun_skipped};"])
  dnl Family known but not from mpi.h: the launcher's word is all there is.
  AS_IF([test "x$MPI_IMPL" = xother && test "x$gpuport_mpi_lfam" != xunknown],
    [MPI_IMPL=$gpuport_mpi_lfam])
])

AS_IF([test "x$gpuport_have_mpi" = xyes], [
  AS_CASE([$MPI_IMPL],
    [openmpi], [
      dnl Open MPI binds each rank to one core by default; a gpuport rank runs
      dnl three threads (application, proxy, flusher), which then time-slice
      dnl on that core: 10 ms per ping-pong round trip measured on an H200 pair.
      AS_IF([test "x${MPIRUN_FLAGS+set}" != xset], [MPIRUN_FLAGS="--oversubscribe --bind-to none"])
      MPIRUN_ROOT_FLAGS=--allow-run-as-root],
    [mpich], [
      dnl Hydra runs more ranks than cores and as root without options; it
      dnl binds nothing unless asked (HYDRA_BINDING), which -bind-to none
      dnl overrides, for the same three threads per rank.
      AS_IF([test "x${MPIRUN_FLAGS+set}" != xset], [MPIRUN_FLAGS="-bind-to none"])])
])

AS_IF([test "x$gpuport_have_mpi" = xno], [
  AS_IF([test -n "$gpuport_mpi_required" && test "x$with_mpi" != xno],
    [AC_MSG_ERROR([MPI was requested ($gpuport_mpi_required) but cannot be used:$gpuport_mpi_why
      install an MPI (Debian: openmpi-bin libopenmpi-dev, or mpich libmpich-dev),
      set MPICC=/path/to/mpicc, or use --without-mpi])])
  MPI_CFLAGS=
  MPI_LIBS=
  MPI_IMPL=
  MPI_IMPL_VERSION=
  MPIRUN_ROOT_FLAGS=
])

dnl A second MPI of the other family, for test/mpi/mismatch.sh only: a
dnl program compiled with it, linked against this libgpuport_mpi, must be
dnl refused. Its absence only skips that test.
MPI_OTHER_CFLAGS=
MPI_OTHER_LIBS=
MPI_OTHER_IMPL=
AS_IF([test "x$gpuport_have_mpi" = xyes], [
  AS_CASE([$MPI_IMPL],
    [openmpi], [gpuport_mpi_other=mpich],
    [mpich], [gpuport_mpi_other=openmpi],
    [gpuport_mpi_other=])
  AS_IF([test -z "$MPICC_OTHER" && test -n "$gpuport_mpi_other"],
    [AC_PATH_PROG([MPICC_OTHER], [mpicc.$gpuport_mpi_other])])
  AS_IF([test -n "$MPICC_OTHER"], [
    _GPUPORT_MPI_PROBE([MPICC_OTHER], [gpuport_mo])
    AS_IF([test -z "$gpuport_mo_why" && test "x$gpuport_mo_family" != "x$MPI_IMPL" &&
           test "x$gpuport_mo_family" != xother],
      [MPI_OTHER_CFLAGS=$gpuport_mo_cflags
       MPI_OTHER_LIBS=$gpuport_mo_libs
       MPI_OTHER_IMPL="$gpuport_mo_family $gpuport_mo_version"],
      [AS_IF([test -z "$gpuport_mo_why"],
         [gpuport_mo_why="it compiles for $gpuport_mo_family, not for a family other than $MPI_IMPL"])
       AC_MSG_WARN([MPICC_OTHER=$MPICC_OTHER is not used (the mismatch test will skip): $gpuport_mo_why])])])
])

AS_IF([test "x$gpuport_have_mpi" = xyes], [gpuport_have_mpi_num=1], [gpuport_have_mpi_num=0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_MPI], [$gpuport_have_mpi_num],
  [1 when the MPI bootstrap is built, else 0])
AM_CONDITIONAL([HAVE_MPI], [test "x$gpuport_have_mpi" = xyes])
AM_CONDITIONAL([HAVE_MPI_OTHER], [test -n "$MPI_OTHER_IMPL"])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AC_SUBST([MPI_IMPL])
AC_SUBST([MPI_IMPL_VERSION])
AC_SUBST([MPICC])
AC_SUBST([MPIRUN])
AC_SUBST([MPIRUN_FLAGS])
AC_SUBST([MPIRUN_ROOT_FLAGS])
AC_SUBST([MPI_OTHER_CFLAGS])
AC_SUBST([MPI_OTHER_LIBS])
AC_SUBST([MPI_OTHER_IMPL])
])
