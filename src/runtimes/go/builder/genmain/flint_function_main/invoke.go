package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
)

// serveFunction calls the function. A panic is the function's error: its
// value and stack go to stderr (the function's log) and the client gets a
// 500, or, when the response has already started, a cut connection, so that
// a partial body is never mistaken for a whole one.
func serveFunction(h http.Handler, w http.ResponseWriter, r *http.Request) {
	tw, ok := w.(*trackingWriter)
	if !ok {
		tw = &trackingWriter{ResponseWriter: w}
	}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			// The function's own way to cut the connection without a log line.
			panic(p)
		}
		fmt.Fprint(os.Stderr, markLines(requestID(r), fmt.Sprintf("panic in function: %v\n%s", p, debug.Stack())))
		if tw.status != 0 {
			panic(http.ErrAbortHandler)
		}
		// Headers the function set before it panicked are not part of this answer.
		for k := range tw.Header() {
			delete(tw.Header(), k)
		}
		sendJSON(tw, http.StatusInternalServerError, "Internal server error")
	}()
	h.ServeHTTP(tw, r)
}

// trackingWriter records whether (and with what status) the response started.
// It passes Flush, Hijack and ReadFrom through, and Unwrap lets
// http.ResponseController reach the rest.
type trackingWriter struct {
	http.ResponseWriter
	status int
}

func (t *trackingWriter) WriteHeader(code int) {
	// 1xx informational headers do not start the response.
	if t.status == 0 && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		t.status = code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) ReadFrom(src io.Reader) (int64, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	if rf, ok := t.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(t.ResponseWriter, src)
}

func (t *trackingWriter) Flush() {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if hj, ok := t.ResponseWriter.(http.Hijacker); ok {
		conn, rw, err := hj.Hijack()
		if err == nil && t.status == 0 {
			t.status = http.StatusSwitchingProtocols
		}
		return conn, rw, err
	}
	return nil, nil, http.ErrNotSupported
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
