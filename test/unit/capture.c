/* stderr capture for tests; see capture.h. */
#include "capture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static FILE *cap_file;
static int saved_stderr = -1;
static char cap_buf[65536];

void capture_begin(void)
{
    cap_file = tmpfile();
    CHECK(cap_file != NULL);
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    CHECK(saved_stderr >= 0);
    CHECK(dup2(fileno(cap_file), STDERR_FILENO) == STDERR_FILENO);
}

const char *capture_peek(void)
{
    ssize_t n;

    fflush(stderr);
    n = pread(fileno(cap_file), cap_buf, sizeof(cap_buf) - 1, 0);
    cap_buf[n > 0 ? n : 0] = '\0';
    return cap_buf;
}

const char *capture_end(void)
{
    size_t n;

    fflush(stderr);
    CHECK(dup2(saved_stderr, STDERR_FILENO) == STDERR_FILENO);
    close(saved_stderr);
    rewind(cap_file);
    n = fread(cap_buf, 1, sizeof(cap_buf) - 1, cap_file);
    cap_buf[n] = '\0';
    fclose(cap_file);
    return cap_buf;
}

int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}
