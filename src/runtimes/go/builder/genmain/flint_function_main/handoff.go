package main

// What a generic worker hands the function's executable it execs
// (exec.go, function.go): the listening socket, the connection whose
// specialize request the executable answers, and the entrypoint, as file
// descriptor numbers and a name in these variables. The executable removes
// them from its environment before the function's code can read it.
const (
	envListenerFD = "FLINT_GO_LISTENER_FD"
	envSpecialize = "FLINT_GO_SPECIALIZE_FD"
	envEntrypoint = "FLINT_GO_ENTRYPOINT"
	// functionBuildTag marks the builder's executables (go build -tags),
	// which debug/buildinfo reads back from the file.
	functionBuildTag = "flintfn"
)
