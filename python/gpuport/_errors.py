"""gpuport's exception and warning classes (imported by the C module)."""

_NAMES = {
    0: "OK",
    -1: "ERR_INVALID_ARG",
    -2: "ERR_INVALID_CONFIG",
    -3: "ERR_OUT_OF_RANGE",
    -10: "ERR_NOT_SUPPORTED",
    -20: "ERR_NO_MEMORY",
    -21: "ERR_NO_RESOURCE",
    -22: "ERR_AGAIN",
    -23: "ERR_BUSY",
    -30: "ERR_TRANSPORT",
    -40: "ERR_PEER",
    -41: "ERR_CLOSED",
    -50: "ERR_TIMEOUT",
    -60: "ERR_VERSION",
    -71: "ERR_SHUTDOWN",
    -99: "ERR_INTERNAL",
}


class Error(Exception):
    """A gpuport call failed.

    status: the gpuport_status_t (gpuport.ERR_*), negative.
    name: its name ("ERR_OUT_OF_RANGE").
    message: the call that failed, and the library's text of the status.
    The library logs the details (values, the peer, what to do) once, on
    stderr or GPUPORT_LOG_FILE, just before the exception.
    """

    def __init__(self, status, message):
        super().__init__(status, message)
        self.status = status
        self.message = message

    @property
    def name(self):
        return _NAMES.get(self.status, str(self.status))

    def __str__(self):
        from gpuport._gpuport import status_string

        return "%s: %s (GPUPORT_%s, %d)" % (
            self.message, status_string(self.status), self.name, self.status)


class LeakWarning(RuntimeWarning):
    """A gpuport object was dropped open: its handle is detached (never
    destroyed by the garbage collector) and destroyed by comm.close()."""
