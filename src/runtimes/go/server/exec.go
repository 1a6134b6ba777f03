//go:build !flintfn

package main

import (
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
)

// functionExec is a function's executable and what it starts with.
type functionExec struct {
	file      string
	symbol    string
	env       map[string]string
	goVersion string
}

// errAnswered: execFunction failed after it took over the connection and
// has answered the request itself.
var errAnswered = errors.New("answered on the hijacked connection")

// functionBuild reads the Go build settings of file: whether flint/go-builder
// made it (the function tag) and for which hand-over. It opens the ELF file
// and reads one section; a plugin or any other program is no function.
func functionBuild(file string) (function, handoff bool, goVersion string) {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return false, false, ""
	}
	for _, s := range info.Settings {
		if s.Key != "-tags" {
			continue
		}
		for _, t := range strings.Split(s.Value, ",") {
			function = function || t == functionBuildTag
			handoff = handoff || t == handoffTag
		}
	}
	return function, handoff, info.GoVersion
}

// inheritable duplicates the descriptor under c into one that survives
// exec. Not through File(): its Fd() puts the descriptor, shared with the
// worker's own listener or connection, into blocking mode, and a worker
// whose exec then failed could no longer stop its accept loop.
func inheritable(c any) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("a %T cannot be handed over", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	// dup leaves close-on-exec off on the new descriptor.
	fd, dupErr := -1, error(nil)
	if err := raw.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	return fd, dupErr
}

// execFunction replaces this process with the function's executable, which
// serves the same socket and answers this request once its function is
// loaded: the process, its pid, cgroup, sandbox and output stay the ones
// the executor started. It returns only on failure, with a specializeError
// to send, or errAnswered once the connection has been taken over. Nothing
// has changed in this process then, so the worker stays generic.
//
// Starting a function this way costs a fresh process image (a few ms) where
// plugin.Open cost 6-12 ms and about as much CPU again: most of it the
// dynamic linker resolving the plugin's symbols against this program.
func (rt *runtime) execFunction(w http.ResponseWriter, fx *functionExec) error {
	generic := func(se *specializeError) *specializeError {
		se.generic = true
		return se
	}
	file, err := filepath.Abs(fx.file)
	if err != nil {
		return generic(loadFailure("%v", err))
	}
	st, err := os.Stat(file)
	if err != nil {
		return generic(loadFailure("%v", err))
	}
	if st.Mode()&0o111 == 0 {
		return generic(loadFailure("%s is not executable (mode %v): deploy the builder's output as it is (a zip keeps the mode), or the source with --src", file, st.Mode().Perm()))
	}
	if fx.goVersion != goruntime.Version() {
		// Only a rebuild brings a function a newer standard library (net/http included); say so where its owner looks.
		fmt.Fprintf(os.Stderr, "flint-runtime: the function was built with %s, this worker's toolchain is %s: build the package again (flint package update --src) for its fixes\n", fx.goVersion, goruntime.Version())
	}
	if rt.listener == nil {
		return generic(loadFailure("no listening socket to hand over"))
	}
	options, err := json.Marshal(rt.opts.handed())
	if err != nil {
		return generic(loadFailure("%v", err))
	}
	lnFD, err := inheritable(rt.listener)
	if err != nil {
		return generic(loadFailure("cannot hand over the listening socket: %v", err))
	}
	defer syscall.Close(lnFD)

	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return generic(loadFailure("cannot hand over the connection: %v", err))
	}
	answer := func(se *specializeError) error {
		fmt.Fprintln(os.Stderr, se.message)
		writeRawAnswer(conn, se.status, jsonError(se.message), true)
		conn.Close()
		return errAnswered
	}
	if buf.Reader.Buffered() > 0 {
		// Only the executor calls here, one request at a time; bytes after
		// the request cannot follow the connection into the new program.
		return answer(badRequest("a request was pipelined after the specialize request"))
	}
	connFD, err := inheritable(conn)
	if err != nil {
		return answer(generic(loadFailure("cannot hand over the connection: %v", err)))
	}
	defer syscall.Close(connFD)

	// The function's variables replace the worker's of the same name, and
	// the hand-over's replace both.
	set := make(map[string]string, len(fx.env)+4)
	for k, v := range fx.env {
		set[k] = v
	}
	set[envListenerFD] = strconv.Itoa(lnFD)
	set[envSpecialize] = strconv.Itoa(connFD)
	set[envEntrypoint] = fx.symbol
	set[envOptions] = string(options)
	env := make([]string, 0, len(os.Environ())+len(set))
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := set[k]; !over {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	// Relative paths in the function, also in its init functions, resolve
	// next to its code, as in a container.
	wd, _ := os.Getwd()
	_ = os.Chdir(filepath.Dir(file))
	err = syscall.Exec(file, []string{file}, env)
	// Still this program, unchanged but for its directory.
	if wd != "" {
		_ = os.Chdir(wd)
	}
	return answer(generic(loadFailure("cannot start %s: %v", file, err)))
}
