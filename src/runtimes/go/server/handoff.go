package main

// What a generic worker hands the function's executable it execs
// (exec.go, function.go): the listening socket, the connection whose
// specialize request the executable answers, the entrypoint and the
// worker's options, as descriptor numbers, a name and JSON in these
// variables. The executable's main removes them from its environment; the
// function's package initialization runs before that and could read them,
// which gives it nothing it lacks: it is the same process.
const (
	envListenerFD = "FLINT_GO_LISTENER_FD"
	envSpecialize = "FLINT_GO_SPECIALIZE_FD"
	envEntrypoint = "FLINT_GO_ENTRYPOINT"
	envOptions    = "FLINT_GO_OPTIONS"
	// functionBuildTag marks the builder's executables (go build -tags),
	// which debug/buildinfo reads back from the file.
	functionBuildTag = "flintfn"
	// handoffTag says which hand-over the executable speaks, also as a build
	// tag: a worker refuses an executable built for another one. Change it
	// with what the hand-over passes, and in builder/build.
	handoffTag = "flinthandoff1"
)
