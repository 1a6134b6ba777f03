// The Go baseline of the cold-start storms (bench/storm.ts): a plain Go
// program, what a user would otherwise start per function, that listens on
// the Unix socket named by its argument, says so on its first line of output
// and answers every request "hello" until it is killed. Standard library only.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gohello SOCKET")
		os.Exit(2)
	}
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	err = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("hello"))
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
