/* Test helper: a process environment without GPUPORT_* variables, so that a
 * test sees the library's defaults whatever the caller exported. */
#ifndef GPUPORT_TEST_TESTENV_H
#define GPUPORT_TEST_TESTENV_H

/* Unsets every GPUPORT_* variable (up to 64 of them, names under 128 bytes). */
void testenv_clear_gpuport(void);

#endif
