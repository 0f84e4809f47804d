dnl gpuport_cuda.m4 -- optional CUDA toolkit (cuda.h for the library, nvcc and
dnl the static runtime for .cu test programs).
dnl
dnl The library itself never links libcuda: it dlopens libcuda.so.1 at run time,
dnl so a build made on a machine without a driver still runs where there is one.
dnl
dnl GPUPORT_CHECK_CUDA sets and substitutes
dnl   CUDA_CPPFLAGS CUDA_LDFLAGS CUDA_LIBS NVCC NVCCFLAGS NVCC_ARCH CUDA_VERSION_STR
dnl and defines GPUPORT_HAVE_CUDA 0|1, AM_CONDITIONAL HAVE_CUDA.
dnl   gpuport_have_cuda    yes|no
dnl   gpuport_cuda_dir     toolkit root when found

AC_DEFUN([GPUPORT_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [CUDA toolkit root (needs DIR/include/cuda.h and DIR/bin/nvcc); default: guess
     /usr/local/cuda, then nvcc on PATH])],
  [], [with_cuda=guess])
AC_ARG_VAR([NVCC], [CUDA compiler driver (default: DIR/bin/nvcc)])
AC_ARG_VAR([NVCC_ARCH], [GPU architecture for .cu code, sm_XX (default: sm_90); compute_XX PTX is embedded too])
AC_ARG_VAR([NVCCFLAGS], [flags for nvcc (default: -O2 -std=c++17 -gencode for NVCC_ARCH, -Xcompiler -fPIC)])

gpuport_have_cuda=no
gpuport_cuda_dir=
gpuport_cuda_why=
CUDA_CPPFLAGS=
CUDA_LDFLAGS=
CUDA_LIBS=
CUDA_VERSION_STR=
gpuport_nvcc_user=$NVCC

AS_CASE([$with_cuda],
  [no], [gpuport_cuda_candidates=],
  [yes|guess], [
    gpuport_cuda_candidates=/usr/local/cuda
    AS_IF([test -n "$gpuport_nvcc_user"],
      [gpuport_nvcc_path=`command -v "$gpuport_nvcc_user" 2>/dev/null`],
      [gpuport_nvcc_path=`command -v nvcc 2>/dev/null`])
    AS_IF([test -n "$gpuport_nvcc_path"],
      [gpuport_nvcc_root=`AS_DIRNAME(["$gpuport_nvcc_path"])`
       gpuport_nvcc_root=`AS_DIRNAME(["$gpuport_nvcc_root"])`
       gpuport_cuda_candidates="$gpuport_cuda_candidates $gpuport_nvcc_root"])],
  [gpuport_cuda_candidates=$with_cuda])

AS_IF([test "x$with_cuda" != xno], [AC_MSG_CHECKING([for the CUDA toolkit])])
for gpuport_d in $gpuport_cuda_candidates; do
  AS_IF([test ! -f "$gpuport_d/include/cuda.h"],
    [gpuport_cuda_why="$gpuport_cuda_why $gpuport_d/include/cuda.h missing;"; continue])
  AS_IF([test -n "$gpuport_nvcc_user"],
    [gpuport_nvcc=$gpuport_nvcc_user],
    [gpuport_nvcc=$gpuport_d/bin/nvcc])
  AS_IF([test ! -x "$gpuport_nvcc" && ! command -v "$gpuport_nvcc" >/dev/null 2>&1],
    [gpuport_cuda_why="$gpuport_cuda_why no nvcc at $gpuport_nvcc;"; continue])
  gpuport_cuda_libdir=
  for gpuport_l in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
    AS_IF([test -f "$gpuport_d/$gpuport_l/libcudart_static.a"],
      [gpuport_cuda_libdir=$gpuport_d/$gpuport_l; break])
  done
  AS_IF([test -z "$gpuport_cuda_libdir"],
    [gpuport_cuda_why="$gpuport_cuda_why no libcudart_static.a under $gpuport_d;"; continue])
  gpuport_cuda_dir=$gpuport_d
  NVCC=$gpuport_nvcc
  break
done
AS_IF([test "x$with_cuda" != xno],
  [AS_IF([test -n "$gpuport_cuda_dir"],
    [AC_MSG_RESULT([$gpuport_cuda_dir])],
    [AC_MSG_RESULT([no])])])

dnl cuda.h must be usable from C: the flusher includes it for the driver API types.
AS_IF([test -n "$gpuport_cuda_dir"], [
  CUDA_CPPFLAGS="-I$gpuport_cuda_dir/include"
  CUDA_LDFLAGS="-L$gpuport_cuda_libdir"
  CUDA_LIBS="-L$gpuport_cuda_libdir -lcudart_static -ldl -lrt -lpthread"
  AC_MSG_CHECKING([whether cuda.h compiles with $CC])
  gpuport_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cuda.h>]],
                                     [[CUdeviceptr p = 0; int v = CUDA_VERSION; (void)p; (void)v;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     gpuport_cuda_why="$gpuport_cuda_why $gpuport_cuda_dir/include/cuda.h does not compile (see config.log);"
     gpuport_cuda_dir=])
  CPPFLAGS=$gpuport_save_CPPFLAGS
])

AS_IF([test -n "$gpuport_cuda_dir"], [
  AS_IF([test -z "$NVCC_ARCH"], [NVCC_ARCH=sm_90])
  gpuport_cuda_cc=`echo "$NVCC_ARCH" | sed -n 's/^sm_\([[0-9]][[0-9a-z]]*\)$/\1/p'`
  AS_IF([test -z "$gpuport_cuda_cc"],
    [AC_MSG_ERROR([NVCC_ARCH=$NVCC_ARCH is not of the form sm_XX (e.g. sm_90)])])
  dnl Two -gencode options rather than code=[sm,compute]: no brackets for a shell to glob.
  AS_IF([test -z "$NVCCFLAGS"],
    [NVCCFLAGS="-O2 -std=c++17 -gencode arch=compute_$gpuport_cuda_cc,code=sm_$gpuport_cuda_cc -gencode arch=compute_$gpuport_cuda_cc,code=compute_$gpuport_cuda_cc -Xcompiler -fPIC"])
  CUDA_VERSION_STR=`$NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\),.*/\1/p'`
  AC_MSG_CHECKING([whether $NVCC compiles for $NVCC_ARCH])
  cat > conftest.cu <<_GPUPORT_EOF
__global__ void gpuport_conftest_kernel(int *p) { p[[threadIdx.x]] = 1; }
int main(void) { return 0; }
_GPUPORT_EOF
  AS_IF([$NVCC $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
    [AC_MSG_RESULT([yes])
     gpuport_have_cuda=yes],
    [AC_MSG_RESULT([no])
     gpuport_cuda_why="$gpuport_cuda_why $NVCC $NVCCFLAGS failed on a trivial kernel (see config.log);"])
  rm -f conftest.cu conftest.$OBJEXT
])

AS_IF([test "x$gpuport_have_cuda" = xno], [
  AS_CASE([$with_cuda],
    [no|guess], [],
    [AC_MSG_ERROR([CUDA was requested (--with-cuda=$with_cuda) but cannot be used:$gpuport_cuda_why
      point --with-cuda at a toolkit root holding include/cuda.h, bin/nvcc and lib64/libcudart_static.a,
      or use --without-cuda])])
  CUDA_CPPFLAGS=
  CUDA_LDFLAGS=
  CUDA_LIBS=
  NVCC=
  gpuport_cuda_dir=
])

AS_IF([test "x$gpuport_have_cuda" = xyes], [gpuport_have_cuda_num=1], [gpuport_have_cuda_num=0])
AC_DEFINE_UNQUOTED([GPUPORT_HAVE_CUDA], [$gpuport_have_cuda_num],
  [1 when built with the CUDA toolkit (driver loaded at run time), else 0])
AM_CONDITIONAL([HAVE_CUDA], [test "x$gpuport_have_cuda" = xyes])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([CUDA_VERSION_STR])
AC_SUBST([NVCC])
AC_SUBST([NVCCFLAGS])
AC_SUBST([NVCC_ARCH])
])
