module flint.dev/bench/gohello

go 1.21
