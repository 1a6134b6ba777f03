package main

import (
	"net/http"
	"strings"
)

// requestMark is what starts a line of the function log written for one
// request: the mark, the router's request id, the mark again (the executor
// reads it, src/api/function-log-line.ts). A Go function shares one stdout
// with every request in flight, so the runtime cannot tell whose its lines
// are; it marks its own (a panic's value and stack), and a function may
// mark its lines the same way.
const requestMark = "\x1e"

// requestID is the router's X-Flint-Request-Id when it is one: 1-192
// printable ASCII characters, no spaces. Anything else gets no mark.
func requestID(r *http.Request) string {
	id := r.Header.Get("X-Flint-Request-Id")
	if len(id) == 0 || len(id) > 192 {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return ""
		}
	}
	return id
}

// markLines starts every line of text with the request's mark (none without an id).
func markLines(id, text string) string {
	if id == "" {
		return text
	}
	mark := requestMark + id + requestMark
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(mark)
			b.WriteString(l)
		}
	}
	return b.String()
}
