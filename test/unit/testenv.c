/* See testenv.h. */
#include "testenv.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

void testenv_clear_gpuport(void)
{
    char names[64][128];
    int n = 0;

    /* names first: unsetenv changes environ under the loop */
    for (char **e = environ; e && *e && n < 64; e++) {
        size_t len = strcspn(*e, "=");
        if (strncmp(*e, "GPUPORT_", 8) == 0 && len < sizeof(names[0])) {
            memcpy(names[n], *e, len);
            names[n++][len] = '\0';
        }
    }
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
}
