/* Captures what the library logs to stderr, for tests that assert on its
 * messages. Not reentrant: one capture at a time. */
#ifndef GPUPORT_TEST_CAPTURE_H
#define GPUPORT_TEST_CAPTURE_H

void capture_begin(void);
/* What has been captured so far, the capture going on; valid until the
 * next capture_peek or capture_end. */
const char *capture_peek(void);
/* Ends the capture; the text stays valid until the next capture_end. */
const char *capture_end(void);
/* Occurrences of needle in hay. */
int count_of(const char *hay, const char *needle);

#endif
