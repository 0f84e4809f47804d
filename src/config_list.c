/* Writing parsed GPUPORT_* lists back as text (config.h). Apart from
 * config.c, since transports use these and config.c uses the transport
 * list: together they would close a cycle in the link graph. */
#include <stdio.h>

#include "config.h"

void gpuport_hca_list_format(const gpuport_hca_list_t *list, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < list->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s%s%.0u", i ? "," : "",
                                 list->entry[i].dev, list->entry[i].port ? ":" : "",
                                 list->entry[i].port);
}

void gpuport_if_list_format(const gpuport_if_list_t *list, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", list->exclude ? "^" : "");

    for (int i = 0; i < list->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", list->prefix[i]);
}
