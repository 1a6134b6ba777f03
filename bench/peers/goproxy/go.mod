module flint.dev/bench/goproxy

go 1.21
