/*
 * The user guide's (docs/GUIDE.md) table of GPUPORT_* variables must say
 * what the library's configuration table says (the core's rows and every
 * transport's): every variable, its default and its one-line doc, and no
 * variable the library does not know.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"

int main(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096], line[2048], expect[2048];
    int found[64] = {0}, rows = 0;
    FILE *f;

    CHECK(gpuport_config_nvars() <= 64);
    snprintf(path, sizeof(path), "%s/docs/GUIDE.md", top ? top : ".");
    f = fopen(path, "r");
    if (!f)
        SKIP("cannot read %s (run from the source tree or set top_srcdir)", path);
    while (fgets(line, sizeof(line), f)) {
        size_t i;
        if (strncmp(line, "| `GPUPORT_", 11) != 0)
            continue;
        rows++;
        line[strcspn(line, "\n")] = '\0';
        for (i = 0; i < gpuport_config_nvars(); i++) {
            const gpuport_config_var_t *v = gpuport_config_var(i);
            snprintf(expect, sizeof(expect), "| `%s` |", v->name);
            if (strncmp(line, expect, strlen(expect)) != 0)
                continue;
            snprintf(expect, sizeof(expect), "| `%s` | `%s` | %s |", v->name, v->default_value,
                     v->doc);
            CHECK_MSG(strcmp(line, expect) == 0,
                      "docs/GUIDE.md row\n  %s\ndiffers from the library's\n  %s", line, expect);
            found[i]++;
            break;
        }
        CHECK_MSG(i < gpuport_config_nvars(),
                  "docs/GUIDE.md documents a variable the library lacks: %s", line);
    }
    fclose(f);
    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        CHECK_MSG(found[i] == 1, "%s is documented %d times in docs/GUIDE.md (expected once)",
                  gpuport_config_var(i)->name, found[i]);
    printf("docs/GUIDE.md documents all %d variables as the library defines them\n", rows);
    return 0;
}
