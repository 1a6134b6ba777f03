module flint.dev/go-builder-genmain

go 1.21
