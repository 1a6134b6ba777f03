package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// runtime is the worker's one HTTP handler: the control routes, and once
// specialized, the function.
type runtime struct {
	codepath string
	// The worker's options, handed to a function's executable.
	opts options
	// The socket the worker serves, handed to a function's executable.
	listener net.Listener
	// The function, set once by a successful specialization.
	fn atomic.Pointer[http.Handler]
	// Held while a specialization runs; attempted refuses a second one, even
	// after a failure, since a half-initialized plugin may have left the
	// process in any state.
	mu        sync.Mutex
	attempted bool
}

func newRuntime(codepath string) *runtime {
	return &runtime{codepath: codepath}
}

func (rt *runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn := rt.fn.Load()
	// Requests the router forwards name their function, so a function may
	// serve /healthz or /specialize itself; only the executor's own calls
	// (which carry no such header) reach the control routes.
	if fn != nil && r.Header.Get("X-Flint-Function-Name") != "" {
		serveFunction(*fn, w, r)
		return
	}
	switch {
	case r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", "3")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	case r.URL.Path == "/v2/specialize" && r.Method == http.MethodPost:
		rt.specialize(w, r, 2)
	case r.URL.Path == "/specialize" && r.Method == http.MethodPost:
		rt.specialize(w, r, 1)
	case fn == nil:
		sendJSON(w, http.StatusInternalServerError, "Generic container: no requests supported")
	default:
		serveFunction(*fn, w, r)
	}
}

// jsonError is the body of an error answer.
func jsonError(message string) []byte {
	body, _ := json.Marshal(map[string]string{"error": message})
	return append(body, '\n')
}

// writeRawAnswer writes a whole response on a connection outside the HTTP
// server (the specialize request's, across the exec): a JSON error body, or
// none; closing asks the client to close the connection.
func writeRawAnswer(c net.Conn, status int, body []byte, closing bool) {
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\n", status, http.StatusText(status), len(body))
	if len(body) > 0 {
		head += "Content-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
	}
	if closing {
		head += "Connection: close\r\n"
	}
	_, _ = c.Write(append([]byte(head+"\r\n"), body...))
}

func sendJSON(w http.ResponseWriter, status int, message string) {
	body := jsonError(message)
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// logRequests writes one stderr line per request (FLINT_DEBUG=1).
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			status := tw.status
			if status == 0 {
				status = http.StatusOK
			}
			fmt.Fprintf(os.Stderr, "flint-runtime: %s %s -> %d %.1fms\n", r.Method, r.URL.RequestURI(), status, float64(time.Since(start).Microseconds())/1000)
		}()
		next.ServeHTTP(tw, r)
	})
}
