//go:build !flintfn

// The generic worker of Flint's Go runtime (flint/go-env): an HTTP server
// that is specialized once with a function and from then on serves only it.
//
//	flint-go-runtime [--socket <path> | --port <n> [--host <addr>]] [--memlimit-mb <n>] [--codepath <file>]
//
// The contract is Fission's Go environment's: GET /healthz, POST /specialize
// (v1: the code at /userfunc/user, symbol Handler), POST /v2/specialize
// ({"filepath", "functionName"}), everything else to the function.
//
// A function is what flint/go-builder makes of its source: an executable
// holding these same sources (built with the tag flintfn) and the function.
// Specializing execs it in this process, handing it the listening socket and
// the specialize request's connection (exec.go). A package built before
// that is a Go plugin, which the worker loads into itself as Fission's does;
// a plugin loads only into a program built by the same Go toolchain with the
// same flags, so this server is compiled on the machine that runs it
// (Flint's launch.ts does that) with the flags the builder used for plugins.
package main

func main() {
	opts := startOptions()
	rt := newRuntime(opts.codepath)
	rt.opts = opts
	rt.listener = mustListen(opts)
	serve(opts, rt, rt.listener, nil)
}
