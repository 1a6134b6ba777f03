module flint.dev/go-runtime

go 1.21
