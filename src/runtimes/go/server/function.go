//go:build flintfn

// A function's executable: these sources, built by flint/go-builder with the
// tag flintfn, beside a generated main that names the function package's
// exported functions and variables and calls runFunction. A generic worker
// execs it to specialize (exec.go): it takes over the worker's socket and
// answers the specialize request, then serves the function. Run by hand it
// listens itself and serves the entrypoint named by FLINT_GO_ENTRYPOINT
// (default Handler).
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
)

func runFunction(symbols map[string]any) {
	handed := os.Getenv(envOptions)
	var opts options
	if handed == "" {
		opts = startOptions()
	} else {
		// Exec'd by a worker: its options, not what the function's own variables say.
		var h handedOptions
		if err := json.Unmarshal([]byte(handed), &h); err != nil {
			fmt.Fprintf(os.Stderr, "flint-runtime: the handed-over options: %v\n", err)
			os.Exit(2)
		}
		opts = h.options()
		// The executor's limit even over a GOMEMLIMIT of the function's, as with a plugin.
		if opts.memLimitMB > 0 {
			debug.SetMemoryLimit(int64(opts.memLimitMB) << 20)
		}
	}
	rt := newRuntime(opts.codepath)
	// However the load goes, this process never loads another function.
	rt.attempted = true
	entry := os.Getenv(envEntrypoint)
	if entry == "" {
		entry = defaultSymbol
	}
	lnFD, connFD := os.Getenv(envListenerFD), os.Getenv(envSpecialize)
	for _, k := range []string{envListenerFD, envSpecialize, envEntrypoint, envOptions} {
		os.Unsetenv(k)
	}

	h, loadErr := lookupHandler(symbols, entry)
	if lnFD == "" {
		if loadErr != nil {
			fmt.Fprintln(os.Stderr, loadErr.message)
			os.Exit(1)
		}
		rt.fn.Store(&h)
		serve(opts, rt, mustListen(opts), nil)
		return
	}
	lnFile, connFile := inherited(lnFD, "listener"), inherited(connFD, "connection")
	ln, err := net.FileListener(lnFile)
	lnFile.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint-runtime: the handed-over socket: %v\n", err)
		os.Exit(1)
	}
	conn, err := net.FileConn(connFile)
	connFile.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint-runtime: the handed-over connection: %v\n", err)
		os.Exit(1)
	}
	if loadErr != nil {
		// As a failed plugin load: the worker answers, stays up and serves nothing.
		fmt.Fprintln(os.Stderr, loadErr.message)
		writeRawAnswer(conn, loadErr.status, jsonError(loadErr.message), false)
	} else {
		rt.fn.Store(&h)
		writeRawAnswer(conn, http.StatusOK, nil, false)
	}
	// The connection stays the executor's to reuse.
	serve(opts, rt, &firstConnListener{Listener: ln, first: conn}, closeWhileUnused(conn))
}

// closeWhileUnused closes the handed-over connection at shutdown if no
// request came on it since: the server counts a connection it has read
// nothing from as new, not idle, and would wait 5 s before closing it. A
// request still arriving on it then is cut; the executor sends none to a
// worker it stops.
func closeWhileUnused(conn net.Conn) func(*http.Server) {
	return func(srv *http.Server) {
		var mu sync.Mutex
		unused := true
		srv.ConnState = func(c net.Conn, state http.ConnState) {
			if c == conn && state != http.StateNew {
				mu.Lock()
				unused = false
				mu.Unlock()
			}
		}
		srv.RegisterOnShutdown(func() {
			mu.Lock()
			defer mu.Unlock()
			if unused {
				conn.Close()
			}
		})
	}
}

// specialize: this process was specialized when it started.
func (rt *runtime) specialize(w http.ResponseWriter, r *http.Request, _ int) {
	refuseSecondSpecialization(w, r)
}

// lookupHandler is the entrypoint's handler, with the messages a plugin's
// lookup gives.
func lookupHandler(symbols map[string]any, entry string) (http.Handler, *specializeError) {
	sym, ok := symbols[entry]
	if !ok {
		return nil, loadFailure("symbol %q not found in %s (the entrypoint names an exported function or variable of package main)", entry, os.Args[0])
	}
	h, err := asHandler(sym)
	if err != nil {
		return nil, loadFailure("symbol %q: %v", entry, err)
	}
	return h, nil
}

func inherited(fd, what string) *os.File {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		fmt.Fprintf(os.Stderr, "flint-runtime: the handed-over %s is not a descriptor: %q\n", what, fd)
		os.Exit(1)
	}
	return os.NewFile(uintptr(n), what)
}

// firstConnListener gives the handed-over connection to the server first,
// then what the socket accepts.
type firstConnListener struct {
	net.Listener
	first net.Conn
}

func (l *firstConnListener) Accept() (net.Conn, error) {
	if c := l.first; c != nil {
		l.first = nil
		return c, nil
	}
	return l.Listener.Accept()
}
