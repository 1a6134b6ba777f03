// The generic worker of Flint's Go runtime (flint/go-env): an HTTP server that
// is specialized once with a function compiled as a Go plugin
// (go build -buildmode=plugin) and from then on serves only that function.
//
//	flint-go-runtime [--socket <path> | --port <n> [--host <addr>]] [--memlimit-mb <n>] [--codepath <file>]
//
// The contract is Fission's Go environment's: GET /healthz, POST /specialize
// (v1: the plugin at /userfunc/user, symbol Handler), POST /v2/specialize
// ({"filepath", "functionName"}), everything else to the function.
//
// A plugin loads only into a program built by the same Go toolchain with the
// same flags, so this server is compiled on the machine that runs it (Flint's
// launch.ts does that) with the flags the builder uses for plugins.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

func main() {
	opts, err := parseOptions(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint-go-runtime: %v\n", err)
		os.Exit(2)
	}
	// The executor's memory limit, as a soft limit the garbage collector
	// works to stay under; GOMEMLIMIT in the environment wins.
	if opts.memLimitMB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(opts.memLimitMB) << 20)
	}

	rt := newRuntime(opts.codepath)
	var handler http.Handler = rt
	if opts.debug {
		handler = logRequests(rt)
	}
	srv := &http.Server{
		Handler: handler,
		// Longer than any client pool's idle timeout, so the worker never
		// closes a connection the router is about to reuse. Function
		// timeouts are the router's job, so there is no write timeout.
		IdleTimeout:       120 * time.Second,
		ReadHeaderTimeout: 125 * time.Second,
	}

	ln, err := listen(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint-runtime: cannot listen: %v\n", err)
		os.Exit(1)
	}

	var once sync.Once
	done := make(chan struct{})
	shutdown := func() {
		once.Do(func() {
			go func() {
				// Requests in flight finish (for the grace period); idle
				// keep-alive connections close now.
				ctx, cancel := context.WithTimeout(context.Background(), opts.grace)
				defer cancel()
				_ = srv.Shutdown(ctx)
				close(done)
			}()
		})
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		shutdown()
	}()
	if opts.exitOnEOF {
		// Nobody writes to stdin: it closes when the parent dies.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			shutdown()
		}()
	}

	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "flint-runtime: %v\n", err)
		os.Exit(1)
	}
	<-done
	os.Exit(0)
}

func listen(opts options) (net.Listener, error) {
	if opts.socket != "" {
		// A socket file left by an earlier worker would make listen fail.
		if err := os.Remove(opts.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return net.Listen("unix", opts.socket)
	}
	return net.Listen("tcp", net.JoinHostPort(opts.host, fmt.Sprint(opts.port)))
}
