package main

import (
	"fmt"
	"io"
	"net/http"
)

const (
	maxSpecializeBody = 1 << 20
	defaultSymbol     = "Handler"
)

// specializeError is an answer to a failed specialization.
type specializeError struct {
	status  int
	message string
	// generic: nothing was loaded, so the worker may still be specialized.
	generic bool
}

func (e *specializeError) Error() string { return e.message }

func badRequest(format string, a ...any) *specializeError {
	return &specializeError{status: http.StatusBadRequest, message: fmt.Sprintf(format, a...), generic: true}
}

func loadFailure(format string, a ...any) *specializeError {
	return &specializeError{status: http.StatusInternalServerError, message: "error specializing function: " + fmt.Sprintf(format, a...)}
}

// refuseSecondSpecialization answers a specialize request to a worker that
// has loaded a function (or failed to, which leaves it in any state).
func refuseSecondSpecialization(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxSpecializeBody))
	sendJSON(w, http.StatusBadRequest, "Not a generic container: this worker has been specialized already")
}
