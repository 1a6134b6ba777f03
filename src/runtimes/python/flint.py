"""What a Python function may import from Flint: the request being served
(``flint.request``, for handlers that take no argument) and ``Response``."""
import threading

_local = threading.local()


class Response:
    """A full answer: body, status and headers."""

    def __init__(self, body=b"", status=200, headers=None):
        self.body = body
        self.status_code = status
        self.headers = dict(headers or {})


class _RequestProxy:
    """The request of the current thread; handlers run one request per thread."""

    def __getattr__(self, name):
        current = getattr(_local, "request", None)
        if current is None:
            raise RuntimeError("flint.request is only available while a request is served")
        return getattr(current, name)


request = _RequestProxy()


def _set_request(req):
    _local.request = req
