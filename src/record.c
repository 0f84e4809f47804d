/* Versioned records; see record.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_BOOTSTRAP
#include "record.h"

#include "log.h"

void gpuport_record_header_init(gpuport_rec_header_t *hdr, uint16_t type, uint16_t size)
{
    hdr->magic = GPUPORT_RECORD_MAGIC;
    hdr->version_major = GPUPORT_VERSION_MAJOR;
    hdr->version_minor = GPUPORT_VERSION_MINOR;
    hdr->version_patch = GPUPORT_VERSION_PATCH;
    hdr->layout = GPUPORT_RECORD_LAYOUT;
    hdr->type = type;
    hdr->size = size;
}

gpuport_status_t gpuport_record_check(const gpuport_rec_header_t *hdr, uint16_t type,
                                      uint16_t size, int peer)
{
    return gpuport_record_check_named(hdr, type, size, NULL, peer);
}

gpuport_status_t gpuport_record_check_named(const gpuport_rec_header_t *hdr, uint16_t type,
                                            uint16_t size, const char *name, int peer)
{
    if (hdr->magic != GPUPORT_RECORD_MAGIC) {
        log_error("rank %d sent a record that is not gpuport's (magic 0x%08x, expected 0x%08x): "
                  "is every rank running a gpuport program?",
                  peer, hdr->magic, GPUPORT_RECORD_MAGIC);
        return GPUPORT_ERR_VERSION;
    }
    /* Patch releases keep record layouts; anything else must match exactly. */
    if (hdr->version_major != GPUPORT_VERSION_MAJOR ||
        hdr->version_minor != GPUPORT_VERSION_MINOR || hdr->layout != GPUPORT_RECORD_LAYOUT) {
        log_error("rank %d runs gpuport %u.%u.%u (record layout %u) but this rank runs "
                  "%d.%d.%d (record layout %d): all ranks must use the same gpuport release",
                  peer, hdr->version_major, hdr->version_minor, hdr->version_patch, hdr->layout,
                  GPUPORT_VERSION_MAJOR, GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH,
                  GPUPORT_RECORD_LAYOUT);
        return GPUPORT_ERR_VERSION;
    }
    if (hdr->type != type || hdr->size != size) {
        log_error("rank %d sent record type %u of %u bytes where type %u of %u bytes%s%s%s was "
                  "expected: the ranks are out of step in setting up gpuport",
                  peer, hdr->type, hdr->size, type, size, name ? " (" : "", name ? name : "",
                  name ? ")" : "");
        return GPUPORT_ERR_VERSION;
    }
    return GPUPORT_OK;
}
