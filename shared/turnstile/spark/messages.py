"""What Spark says went wrong, as one line for a result record, a lock and an alert; and whether
it went wrong in the machine rather than in the batch."""

from __future__ import annotations

from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError

_LONGEST = 600  # characters: enough for Spark's reason and the file it names, short for an alert
# Java exceptions of the network, the storage service or a dying driver: never a batch's data. Not
# java.io.IOException itself: a corrupt or truncated file raises one too.
_MACHINE_JAVA = (
    "java.net.",
    "javax.net.ssl.",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedChannelException",
    "org.apache.hadoop.fs.s3a.AWSClientIOException",
    "org.apache.hadoop.fs.s3a.AWSStatus500Exception",
    "org.apache.hadoop.fs.s3a.AWSServiceThrottledException",
    "org.apache.hadoop.fs.s3a.AWSNoResponseException",
)
_STOPPED = "stopped SparkContext"  # IllegalStateException: Cannot call methods on a stopped SparkContext


def reason(exc: BaseException) -> str:
    """Spark's message as one line; for an error while a query ran, that of its root cause (py4j's
    own first line only names the JVM call). A message of several lines (a CSV header check names
    the header, the schema and the file on lines of their own) is joined, not cut to its first."""
    cause: Any = getattr(exc, "java_exception", None)
    if cause is not None:
        while cause.getCause() is not None:
            cause = cause.getCause()
        text = str(cause.getMessage() or cause.toString())
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or not lines[0]:
        return type(exc).__name__
    if lines[0].startswith(("An error occurred while calling", "Traceback")):
        lines = lines[:1]  # a py4j or Python trace below it: its first line is all that reads well
    joined = " ".join(line for line in lines if line)
    return joined if len(joined) <= _LONGEST else f"{joined[: _LONGEST - 3]}..."


def machine_failure(exc: BaseException) -> bool:
    """Whether a failure is the driver's or the storage's, not the batch's: py4j lost the JVM, a
    connection failed, the Spark context stopped, a storage request failed with a network error or
    a 5xx/429. Such a job ends without recording a failure of the batch: a transient failure, retried."""
    if isinstance(exc, ConnectionError) or _STOPPED in _text(exc):
        return True
    if isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError):
        return True  # py4j's own: the JVM does not answer
    cause: Any = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    try:
        while cause is not None:
            name = str(cause.getClass().getName())
            if name.startswith(_MACHINE_JAVA) or _STOPPED in str(cause.getMessage() or ""):
                return True
            if name.endswith("HttpResponseException") or name.endswith("GoogleJsonResponseException"):
                status = int(cause.getStatusCode())
                if status >= 500 or status == 429:
                    return True
            cause = cause.getCause()
    except Py4JError:
        return True  # the JVM stopped answering while asked about its own exception
    return False


def _text(exc: BaseException) -> str:
    if isinstance(exc, Py4JJavaError):
        return ""  # its text is asked of the JVM: read through its cause chain instead
    return str(exc)
