package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// options says where the worker listens and where v1 finds its code, from
// the command line and the environment. The executor starts the worker on a
// Unix socket (local mode); a container runs it on a TCP port (kubernetes
// mode, as Fission's Go environment does).
type options struct {
	socket     string // Unix socket path; when set, host and port are not used
	host       string
	port       int
	codepath   string // what POST /specialize (v1) loads
	memLimitMB int    // soft memory limit for the Go runtime (debug.SetMemoryLimit); 0: none
	debug      bool   // one stderr line per request
	exitOnEOF  bool   // exit when stdin closes (the parent died)
	grace      time.Duration
}

func parseOptions(args []string, getenv func(string) string) (options, error) {
	userfunc := strings.TrimRight(getenv("FLINT_USERFUNC_DIR"), "/")
	if getenv("FLINT_USERFUNC_DIR") == "" {
		userfunc = "/userfunc"
	}
	fs := flag.NewFlagSet("flint-go-runtime", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "Unix socket to serve on (default $FLINT_SOCKET)")
	host := fs.String("host", "", "TCP address to listen on (default $FLINT_HOST, else all)")
	port := fs.Int("port", 0, "TCP port (default $FLINT_PORT, else 8888)")
	codepath := fs.String("codepath", userfunc+"/user", "plugin that POST /specialize (v1) loads")
	memlimit := fs.Int("memlimit-mb", 0, "soft memory limit in MiB (ignored when GOMEMLIMIT is set)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	o := options{
		socket:     *socket,
		host:       *host,
		port:       *port,
		codepath:   *codepath,
		memLimitMB: *memlimit,
		debug:      getenv("FLINT_DEBUG") != "" && getenv("FLINT_DEBUG") != "0",
		exitOnEOF:  getenv("FLINT_EXIT_ON_STDIN_EOF") == "1",
		grace:      5 * time.Second,
	}
	// A flag beats the environment; a port flag beats the socket variable.
	if !set["socket"] && !set["port"] {
		o.socket = getenv("FLINT_SOCKET")
	}
	if !set["host"] {
		o.host = getenv("FLINT_HOST")
	}
	if !set["port"] {
		o.port = 8888
		if p := getenv("FLINT_PORT"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return options{}, fmt.Errorf("FLINT_PORT must be a port number, got %q", p)
			}
			o.port = n
		}
	}
	if o.port <= 0 || o.port > 65535 {
		return options{}, fmt.Errorf("port must be between 1 and 65535, got %d", o.port)
	}
	if o.memLimitMB < 0 {
		return options{}, fmt.Errorf("--memlimit-mb must not be negative, got %d", o.memLimitMB)
	}
	if g := getenv("FLINT_SHUTDOWN_GRACE_MS"); g != "" {
		ms, err := strconv.Atoi(g)
		if err != nil || ms < 0 {
			return options{}, fmt.Errorf("FLINT_SHUTDOWN_GRACE_MS must be a number of milliseconds, got %q", g)
		}
		o.grace = time.Duration(ms) * time.Millisecond
	}
	return o, nil
}

// handedOptions is how a generic worker passes its options to the
// function's executable it execs (FLINT_GO_OPTIONS): resolved once, from the
// worker's own command line and environment, so that the function's
// variables, which the executable's environment also holds, cannot change
// where it listens or how it stops.
type handedOptions struct {
	Socket     string `json:"socket"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Codepath   string `json:"codepath"`
	MemLimitMB int    `json:"memLimitMB"`
	Debug      bool   `json:"debug"`
	ExitOnEOF  bool   `json:"exitOnEOF"`
	GraceMS    int64  `json:"graceMs"`
}

func (o options) handed() handedOptions {
	return handedOptions{o.socket, o.host, o.port, o.codepath, o.memLimitMB, o.debug, o.exitOnEOF, o.grace.Milliseconds()}
}

func (h handedOptions) options() options {
	return options{socket: h.Socket, host: h.Host, port: h.Port, codepath: h.Codepath, memLimitMB: h.MemLimitMB, debug: h.Debug, exitOnEOF: h.ExitOnEOF, grace: time.Duration(h.GraceMS) * time.Millisecond}
}
