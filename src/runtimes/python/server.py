"""Flint's Python runtime: a generic worker, specialized once with one
function, then serving every request with it.

Serves HTTP/1.1 on the Unix socket named by FLINT_SOCKET (local mode) or on
TCP --port (default 8888) at --host or $FLINT_HOST (default all addresses).
Routes: GET /healthz; POST /v2/specialize {filepath, functionName, env};
POST /specialize (v1: $FLINT_USERFUNC_DIR/user, function main); anything
else goes to the function once specialized.
Standard library only.
"""
import importlib
import importlib.util
import inspect
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flint  # noqa: E402

MAX_BODY = int(os.environ.get("FLINT_MAX_BODY_BYTES") or 50 * 1024 * 1024)
USERFUNC = os.environ.get("FLINT_USERFUNC_DIR", "/userfunc")


REQUEST_MARK = "\x1e"
# The router sends only such ids; anyone else reaching the worker gets no tag rather than one it wrote.
SANE_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,192}\Z")


class RequestOutput:
    """stdout or stderr, starting each line a request writes with its id
    (the mark the executor reads, src/api/function-log-line.ts), so
    `flint fn log --request-id` finds it. A request runs on one thread; its
    lines are kept until they are whole, so requests on other threads never
    split them."""

    current = threading.local()

    def __init__(self, inner):
        self._inner = inner
        self._pending = threading.local()

    def write(self, text):
        rid = getattr(RequestOutput.current, "id", None)
        if rid is None:
            return self._inner.write(text)
        buf = getattr(self._pending, "text", "") + text
        lines = buf.split("\n")
        self._pending.text = lines.pop()
        if lines:
            mark = REQUEST_MARK + rid + REQUEST_MARK
            self._inner.write("".join(mark + line + "\n" for line in lines))
        return len(text)

    def end_request(self, rid):
        """Writes what the request left of a line, ended, and flushes."""
        rest = getattr(self._pending, "text", "")
        self._pending.text = ""
        if rest:
            self._inner.write(REQUEST_MARK + rid + REQUEST_MARK + rest + "\n")
        self._inner.flush()

    def flush(self):
        self._inner.flush()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def serve_request(rid, work):
    """Runs work() with the thread's output tagged with rid (when it is an id)."""
    if not isinstance(rid, str) or not SANE_REQUEST_ID.match(rid):
        return work()
    RequestOutput.current.id = rid
    try:
        return work()
    finally:
        RequestOutput.current.id = None
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, RequestOutput):
                stream.end_request(rid)


class Headers:
    """Request headers, names case-insensitive."""

    def __init__(self, pairs):
        self._items = {}
        for k, v in pairs:
            key = k.lower()
            self._items[key] = v if key not in self._items else self._items[key] + ", " + v

    def get(self, name, default=None):
        return self._items.get(name.lower(), default)

    def __getitem__(self, name):
        return self._items[name.lower()]

    def __contains__(self, name):
        return name.lower() in self._items

    def items(self):
        return self._items.items()

    def keys(self):
        return self._items.keys()

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return repr(self._items)


class Request:
    """What a handler reads: method, path, url, query, headers, body."""

    def __init__(self, method, url, headers, body):
        self.method = method
        self.url = url
        parts = urlsplit(url)
        self.path = parts.path
        self.query = {k: v[0] if len(v) == 1 else v for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.args = self.query
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.body or b"null")

    def get_data(self, as_text=False):
        return self.text if as_text else self.body

    def get_json(self, force=False, silent=False):
        try:
            return self.json()
        except ValueError:
            if silent:
                return None
            raise


class BadRequest(Exception):
    pass


class NotFound(Exception):
    pass


class State:
    handler = None
    wants_request = False
    attempted = False
    lock = threading.Lock()


def load_module(filepath, module_name):
    """A module from a directory (on sys.path), or the one file given."""
    if os.path.isdir(filepath):
        if filepath not in sys.path:
            sys.path.insert(0, filepath)
        os.chdir(filepath)
        return importlib.import_module(module_name)
    os.chdir(os.path.dirname(filepath) or "/")
    spec = importlib.util.spec_from_loader("flint_function", importlib.machinery.SourceFileLoader("flint_function", filepath))
    module = importlib.util.module_from_spec(spec)
    sys.modules["flint_function"] = module
    spec.loader.exec_module(module)
    return module


def resolve(filepath, function_name):
    """The handler named by the entrypoint: "module.func", "func", or "" (main)."""
    if not os.path.exists(filepath):
        raise NotFound(filepath + ": not found")
    name = function_name or ""
    if os.path.isdir(filepath):
        if "." in name:
            module_name, func = name.rsplit(".", 1)
        else:
            func = name or "main"
            module_name = next((m for m in ("main", "user", "index") if os.path.exists(os.path.join(filepath, m + ".py"))), None)
            if module_name is None:
                raise ValueError("entrypoint '%s' names no module, and %s has no main.py: use 'module.function'" % (name, filepath))
        module = load_module(filepath, module_name)
    else:
        func = name.rsplit(".", 1)[-1] if name else "main"
        module = load_module(filepath, None)
    handler = getattr(module, func, None)
    if handler is None:
        raise ValueError("function '%s' not found in %s" % (func, getattr(module, "__file__", filepath)))
    if not callable(handler):
        raise ValueError("'%s' is not callable (it is a %s)" % (func, type(handler).__name__))
    return handler


def takes_request(handler):
    try:
        params = [p for p in inspect.signature(handler).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return True
    return len(params) > 0


def encode(body):
    """Body and default content type of a handler's return value."""
    if isinstance(body, (bytes, bytearray)):
        return bytes(body), "application/octet-stream"
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(body, (dict, list, int, float, bool)):
        return json.dumps(body).encode("utf-8"), "application/json"
    raise TypeError("the handler returned a body of type %s: return str, bytes, dict or list" % type(body).__name__)


def normalize(result):
    """(body, status, headers) from any return shape the docs allow."""
    if result is None:
        raise TypeError("the handler returned None: return a body, or (body, status[, headers])")
    if isinstance(result, flint.Response) or (hasattr(result, "status_code") and hasattr(result, "body")):
        return result.body, int(result.status_code), dict(getattr(result, "headers", {}) or {})
    if isinstance(result, tuple):
        if len(result) == 2 and isinstance(result[1], dict):
            return result[0], 200, result[1]
        if len(result) == 2:
            return result[0], int(result[1]), {}
        if len(result) == 3:
            return result[0], int(result[1]), dict(result[2] or {})
        raise TypeError("the handler returned a tuple of %d items: use (body, status) or (body, status, headers)" % len(result))
    return result, 200, {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "flint-python"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def address_string(self):
        return "worker"

    def send_json(self, status, obj):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks, size = [], 0
            while True:
                line = self.rfile.readline(65537)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                size += n
                if size > MAX_BODY:
                    raise OverflowError()
                chunks.append(self.rfile.read(n))
                self.rfile.readline(3)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise OverflowError()
        return self.rfile.read(length) if length else b""

    def handle_any(self):
        with InFlight.lock:
            InFlight.count += 1
        try:
            self.handle_counted()
        finally:
            with InFlight.lock:
                InFlight.count -= 1

    def handle_counted(self):
        try:
            body = self.read_body()
        except OverflowError:
            self.close_connection = True
            self.send_json(413, {"error": "request body larger than %d bytes" % MAX_BODY})
            return
        path = urlsplit(self.path).path
        if path == "/healthz" and self.command == "GET":
            self.send_json(200, {"status": "ok"})
            return
        if self.command == "POST" and path in ("/v2/specialize", "/specialize"):
            self.specialize(body, 2 if path == "/v2/specialize" else 1)
            return
        if State.handler is None:
            self.send_json(500, {"error": "Generic container: no requests supported"})
            return
        serve_request(self.headers.get("X-Flint-Request-Id"), lambda: self.invoke(body))

    def specialize(self, body, version):
        with State.lock:
            if State.attempted:
                self.send_json(400, {"error": "Not a generic container: this worker has been specialized already"})
                return
            State.attempted = True
            try:
                if version == 2:
                    try:
                        req = json.loads(body or b"{}")
                    except ValueError as e:
                        raise BadRequest("specialize request is not valid JSON: %s" % e)
                    if not isinstance(req, dict) or not isinstance(req.get("filepath"), str) or not req["filepath"]:
                        raise BadRequest("filepath is required")
                    env = req.get("env") or {}
                    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                        raise BadRequest("env must be an object of strings")
                    os.environ.update(env)
                    filepath, name = req["filepath"], req.get("functionName") or ""
                else:
                    filepath, name = os.path.join(USERFUNC, "user"), "main"
                handler = resolve(filepath, name)
                State.wants_request = takes_request(handler)
                State.handler = handler
            except BadRequest as e:
                State.attempted = False
                self.send_json(400, {"error": str(e)})
                return
            except NotFound as e:
                self.send_json(404, {"error": str(e)})
                return
            except BaseException as e:  # noqa: BLE001 - a function's import may raise anything
                traceback.print_exc()
                self.send_json(500, {"error": "%s: %s" % (type(e).__name__, e)})
                return
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def invoke(self, body):
        req = Request(self.command, self.path, Headers(self.headers.items()), body)
        flint._set_request(req)
        try:
            handler = State.handler
            result = handler(req) if State.wants_request else handler()
            if inspect.isawaitable(result):
                # Imported here, for async handlers only: asyncio is about a sixth of the runtime's start-up CPU,
                # which every cold start would pay.
                import asyncio

                result = asyncio.run(_await(result))
            if inspect.isgenerator(result):
                self.stream(result, 200, {})
                return
            payload, status, headers = normalize(result)
            if inspect.isgenerator(payload):
                self.stream(payload, status, headers)
                return
            data, content_type = encode(payload)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            sys.stderr.flush()
            self.send_json(500, {"error": "Internal server error"})
            return
        finally:
            flint._set_request(None)
        self.send_response(status)
        names = {k.lower() for k in headers}
        for k, v in headers.items():
            self.send_header(k, str(v))
        if "content-type" not in names:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def stream(self, chunks, status, headers):
        self.send_response(status)
        for k, v in headers.items():
            if k.lower() not in ("content-length", "transfer-encoding"):
                self.send_header(k, str(v))
        if "content-type" not in {k.lower() for k in headers}:
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
        except BaseException:  # noqa: BLE001 - the status is sent; all we can do is cut the stream
            traceback.print_exc()
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


async def _await(awaitable):
    return await awaitable


class InFlight:
    """Requests being handled: a stopping worker lets them finish."""
    lock = threading.Lock()
    count = 0


def wait_for_requests(grace_seconds):
    # Handler threads are daemons (an idle keep-alive connection must not hold
    # up the exit), so the ones with a request under way are waited for here.
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        with InFlight.lock:
            if InFlight.count == 0:
                return
        time.sleep(0.02)


# The router opens a connection per request in flight, so a new instance gets
# as many at once as requests waited for it; a Unix socket refuses a connect
# outright once this queue is full (socketserver's default is 5; the kernel
# caps it at net.core.somaxconn).
BACKLOG = 4096


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = BACKLOG


class TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = BACKLOG
    allow_reuse_address = True


class TcpServer6(TcpServer):
    address_family = socket.AF_INET6


def main():
    sys.stdout = RequestOutput(sys.stdout)
    sys.stderr = RequestOutput(sys.stderr)
    port = 8888
    args = sys.argv[1:]
    if "--port" in args:
        port = int(args[args.index("--port") + 1])
    # As the Node and Go runtimes: where pods share one network (the node
    # agent's loopback addresses, chart.listenOnPodIP) each listens on its own.
    host = os.environ.get("FLINT_HOST") or "0.0.0.0"
    if "--host" in args:
        host = args[args.index("--host") + 1]
    sock_path = os.environ.get("FLINT_SOCKET")
    if sock_path:
        try:
            os.unlink(sock_path)
        except FileNotFoundError:
            pass
        server = UnixServer(sock_path, Handler)
    else:
        server = (TcpServer6 if ":" in host else TcpServer)((host, port), Handler)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if os.environ.get("FLINT_EXIT_ON_STDIN_EOF") == "1":
        def watch_stdin():
            try:
                while sys.stdin.buffer.read(65536):
                    pass
            except OSError:
                pass
            stop()
        threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever(poll_interval=0.5)
    server.server_close()
    wait_for_requests(int(os.environ.get("FLINT_SHUTDOWN_GRACE_MS") or 5000) / 1000)
    # Not the interpreter's own shutdown: the thread watching stdin holds its
    # lock while it reads, and finalizing would abort on it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
