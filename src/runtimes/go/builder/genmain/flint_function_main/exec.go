//go:build !flintfn

package main

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// functionExec is a function's executable and what it starts with.
type functionExec struct {
	file   string
	symbol string
	env    map[string]string
}

// errAnswered: execFunction failed after it took over the connection and
// has answered the request itself.
var errAnswered = errors.New("answered on the hijacked connection")

// isFunctionExecutable says whether file is an executable flint/go-builder
// made: a Go program whose build settings carry the function tag. Reading
// them opens the ELF file and reads one section; a plugin or any other
// program is not one.
func isFunctionExecutable(file string) bool {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			for _, t := range strings.Split(s.Value, ",") {
				if t == functionBuildTag {
					return true
				}
			}
		}
	}
	return false
}

type fileConn interface{ File() (*os.File, error) }

// inheritable duplicates what c holds into a descriptor that survives exec.
func inheritable(c any) (*os.File, error) {
	fc, ok := c.(fileConn)
	if !ok {
		return nil, fmt.Errorf("a %T cannot be handed over", c)
	}
	f, err := fc.File()
	if err != nil {
		return nil, err
	}
	// File() gives a close-on-exec duplicate.
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETFD, 0); e != 0 {
		f.Close()
		return nil, e
	}
	return f, nil
}

// execFunction replaces this process with the function's executable, which
// serves the same socket and answers this request once its function is
// loaded: the process, its pid, cgroup, sandbox and output stay the ones
// the executor started. It returns only on failure, with a specializeError
// to send, or errAnswered once the connection has been taken over.
//
// Starting a function this way costs a fresh process image (a few ms) where
// plugin.Open cost 6-12 ms and about as much CPU again: most of it the
// dynamic linker resolving the plugin's symbols against this program.
func (rt *runtime) execFunction(w http.ResponseWriter, fx *functionExec) error {
	st, err := os.Stat(fx.file)
	if err != nil {
		return loadFailure("%v", err)
	}
	if st.Mode()&0o111 == 0 {
		return loadFailure("%s is not executable (mode %v): rebuild the package", fx.file, st.Mode().Perm())
	}
	if rt.listener == nil {
		return loadFailure("no listening socket to hand over")
	}
	lnFile, err := inheritable(rt.listener)
	if err != nil {
		return loadFailure("cannot hand over the listening socket: %v", err)
	}
	defer lnFile.Close()

	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return loadFailure("cannot hand over the connection: %v", err)
	}
	answer := func(se *specializeError) error {
		fmt.Fprintln(os.Stderr, se.message)
		writeRawJSON(conn, se.status, se.message)
		conn.Close()
		return errAnswered
	}
	if buf.Reader.Buffered() > 0 {
		// Only the executor calls here, one request at a time; bytes after
		// the request cannot follow the connection into the new program.
		return answer(badRequest("a request was pipelined after the specialize request"))
	}
	connFile, err := inheritable(conn)
	if err != nil {
		return answer(loadFailure("cannot hand over the connection: %v", err))
	}
	defer connFile.Close()

	// The function's variables replace the worker's of the same name, and
	// the hand-over's replace both.
	set := make(map[string]string, len(fx.env)+3)
	for k, v := range fx.env {
		set[k] = v
	}
	set[envListenerFD] = strconv.Itoa(int(lnFile.Fd()))
	set[envSpecialize] = strconv.Itoa(int(connFile.Fd()))
	set[envEntrypoint] = fx.symbol
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
	_ = os.Chdir(filepath.Dir(fx.file))
	argv := append([]string{fx.file}, os.Args[1:]...)
	err = syscall.Exec(fx.file, argv, env)
	// Still this program: nothing was replaced, so the worker stays generic.
	se := loadFailure("cannot start %s: %v", fx.file, err)
	se.generic = true
	return answer(se)
}

// writeRawJSON writes a whole response, as sendJSON does, on a connection
// taken from the HTTP server, and asks the client to close it.
func writeRawJSON(c net.Conn, status int, message string) {
	body := jsonError(message)
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}
