// The Go peer of `npm run bench`'s peer table: net/http/httputil's
// ReverseProxy in front of one upstream, as Fission's router proxies to a
// function pod. Standard library only; the benchmark runs it with
// GOMAXPROCS=1 (one worker, like the nginx and HAProxy peers) and reads the
// port it listens on from its first line of output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:8080")
	idle := flag.Int("idle", 64, "idle keep-alive connections kept to the upstream")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("-upstream %q: not a URL", *upstream)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = *idle
	transport.MaxIdleConnsPerHost = *idle
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// wrk closes its connections mid-request when its time is up: no error of the proxy's.
		if !errors.Is(err, context.Canceled) {
			log.Printf("proxy error: %v", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	server := &http.Server{Handler: proxy, IdleTimeout: 60 * time.Second, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.Serve(ln))
}
