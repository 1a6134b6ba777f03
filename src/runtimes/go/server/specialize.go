//go:build !flintfn

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"plugin"
	"runtime/debug"
	"strings"
)

// loadRequest is the v2 body. Fission's other keys (url, FunctionMetadata,
// envVersion, ...) are accepted and ignored.
type loadRequest struct {
	Filepath     string            `json:"filepath"`
	FunctionName string            `json:"functionName"`
	Env          map[string]string `json:"env"`
}

func (rt *runtime) specialize(w http.ResponseWriter, r *http.Request, version int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.attempted {
		refuseSecondSpecialization(w, r)
		return
	}
	h, exe, err := rt.load(r, version)
	if err == nil && exe != nil {
		// Returns only when the exec failed.
		err = rt.execFunction(w, exe)
		if err == errAnswered {
			return
		}
	}
	if err != nil {
		var se *specializeError
		if !errors.As(err, &se) {
			se = loadFailure("%v", err)
		}
		if !se.generic {
			rt.attempted = true
		}
		if se.status >= 500 {
			fmt.Fprintln(os.Stderr, se.message)
		}
		sendJSON(w, se.status, se.message)
		return
	}
	rt.attempted = true
	rt.fn.Store(&h)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// load loads a plugin into this process, or finds the function's executable
// for execFunction (exe set, no handler).
func (rt *runtime) load(r *http.Request, version int) (http.Handler, *functionExec, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSpecializeBody+1))
	if err != nil {
		return nil, nil, badRequest("cannot read the specialize request: %v", err)
	}
	if len(body) > maxSpecializeBody {
		return nil, nil, badRequest("specialize request larger than %d bytes", maxSpecializeBody)
	}
	req := loadRequest{Filepath: rt.codepath}
	if version == 2 {
		req = loadRequest{}
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, nil, badRequest("specialize request is not valid JSON: %v", err)
		}
		if req.Filepath == "" {
			return nil, nil, badRequest("filepath is required")
		}
		for k, v := range req.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return nil, nil, badRequest("env.%s is not a valid variable", k)
			}
		}
	}
	symbol := req.FunctionName
	if symbol == "" {
		symbol = defaultSymbol
	}
	if strings.ContainsRune(symbol, 0) {
		return nil, nil, badRequest("functionName must not contain a NUL character")
	}

	file, err := pluginFile(req.Filepath)
	if err != nil {
		return nil, nil, err
	}
	if function, handoff, goVersion := functionBuild(file); function {
		if !handoff {
			return nil, nil, loadFailure("%s was built for another version of Flint's Go runtime: build the package again (flint package update --src)", file)
		}
		return nil, &functionExec{file: file, symbol: symbol, env: req.Env, goVersion: goVersion}, nil
	}
	// The function's variables are in place before its init functions run.
	for k, v := range req.Env {
		if err := os.Setenv(k, v); err != nil {
			return nil, nil, loadFailure("cannot set env.%s: %v", k, err)
		}
	}
	// Relative paths in the function, also in its init functions, resolve
	// next to its code, as in a container.
	_ = os.Chdir(filepath.Dir(file))
	h, err := openHandler(file, symbol)
	return h, nil, err
}

// pluginFile is the function's file at path: the file itself, or in a
// directory (an unpacked deploy archive) its only .so file, else its only
// ELF file (a build's output is stored as one extensionless file), else its
// first regular file, as Fission does.
func pluginFile(path string) (string, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", &specializeError{status: http.StatusNotFound, message: path + ": not found", generic: true}
	}
	if err != nil {
		return "", loadFailure("%v", err)
	}
	if !st.IsDir() {
		return path, nil
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return "", loadFailure("%v", err)
	}
	var so, elf, regular []string
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		regular = append(regular, p)
		if strings.HasSuffix(e.Name(), ".so") {
			so = append(so, p)
		}
		if isELF(p) {
			elf = append(elf, p)
		}
	}
	switch {
	case len(so) == 1:
		return so[0], nil
	case len(so) > 1:
		return "", loadFailure("%s holds %d .so files (%s); deploy one plugin", path, len(so), strings.Join(baseNames(so), ", "))
	case len(elf) == 1:
		return elf[0], nil
	case len(regular) > 0:
		return regular[0], nil
	}
	return "", loadFailure("%s: no plugin file in the directory", path)
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "\x7fELF"
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// openHandler opens a plugin (what the builder made before functions were
// executables) and turns its symbol into a handler. The
// plugin's init functions run here; one that panics fails the
// specialization rather than the worker.
func openHandler(file, symbol string) (h http.Handler, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "panic while loading the function: %v\n%s", p, debug.Stack())
			h, err = nil, loadFailure("panic while loading %s: %v", file, p)
		}
	}()
	if !isELF(file) {
		return nil, loadFailure("%s is not a Go function: deploy Go source with --src, so that the environment's builder (flint/go-builder) compiles it", file)
	}
	p, err := plugin.Open(file)
	if err != nil {
		return nil, loadFailure("%v", err)
	}
	sym, err := p.Lookup(symbol)
	if err != nil {
		return nil, loadFailure("symbol %q not found in %s (the entrypoint names an exported function or variable of package main)", symbol, file)
	}
	h, err = asHandler(sym)
	if err != nil {
		return nil, loadFailure("symbol %q: %v", symbol, err)
	}
	return h, nil
}
