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

// startOptions parses the command line and applies the memory limit: the
// first steps of the generic worker and of a function's executable alike.
func startOptions() options {
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
	return opts
}

// serve answers on ln until SIGTERM, SIGINT or (when asked) the end of
// stdin, then lets the requests in flight finish and exits. configure, if
// set, sees the server before it starts.
func serve(opts options, rt *runtime, ln net.Listener, configure func(*http.Server)) {
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
	if configure != nil {
		configure(srv)
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

func mustListen(opts options) net.Listener {
	ln, err := listen(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint-runtime: cannot listen: %v\n", err)
		os.Exit(1)
	}
	return ln
}
