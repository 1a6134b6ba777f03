// genmain turns a function's package main into a program: the build script
// (../build) runs it in the package's directory before `go build`.
//
//	genmain -dir <package dir> -importpath <its import path> -runtime <runtime sources> -out <subdirectory> [-cgo]
//
// A package named main cannot be imported, so its files' package clause
// becomes `package flintfunction` (nothing else in them changes; a func main
// of theirs becomes an ordinary unexported function): every non-test file
// that says `package main`, also those the build leaves out. The
// subdirectory gets the runtime's sources (src/runtimes/go/server, built
// with the tag flintfn) and a main that hands runFunction every exported
// function and variable of the package by name, as the build will see it
// (the tag flintfn, cgo as -cgo says): the entrypoint is chosen when the
// function is specialized, after the build, as a plugin's symbol was looked
// up. The runtime's files and the main ask for Go 1.21 in their build
// constraints, which raises their language version in a module whose go
// line is older.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const packageName = "flintfunction"

func main() {
	dir := flag.String("dir", "", "the function's package directory")
	importPath := flag.String("importpath", "", "the package's import path")
	runtimeDir := flag.String("runtime", "", "the runtime's sources")
	out := flag.String("out", "", "subdirectory of -dir to write the program into")
	cgo := flag.Bool("cgo", false, "whether the build uses cgo")
	flag.Parse()
	if err := run(*dir, *importPath, *runtimeDir, *out, *cgo); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

func run(dir, importPath, runtimeDir, out string, cgo bool) error {
	if dir == "" || importPath == "" || runtimeDir == "" || out == "" || strings.ContainsAny(out, "/\\") {
		return errors.New("genmain: -dir, -importpath, -runtime and -out (a plain name) are required")
	}
	outDir := filepath.Join(dir, out)
	if _, err := os.Lstat(outDir); err == nil {
		return fmt.Errorf("the source holds %s/, a name the builder needs for its own code: rename it", out)
	}
	ctx := build.Default
	ctx.CgoEnabled = cgo
	ctx.BuildTags = append(append([]string{}, ctx.BuildTags...), "flintfn")
	pkg, err := ctx.ImportDir(dir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return errors.New("no .go files in the source: a Go function is a package main with an exported handler")
		}
		return err
	}
	if pkg.Name != "main" {
		return fmt.Errorf("a Go function is a main package (package main with an exported handler); the source is package %s", pkg.Name)
	}
	built := append(append([]string{}, pkg.GoFiles...), pkg.CgoFiles...)
	sort.Strings(built)
	var names []string
	for _, name := range built {
		exported, err := renamePackage(filepath.Join(dir, name), true)
		if err != nil {
			return err
		}
		names = append(names, exported...)
	}
	// Left out of this build, but one package with the rest: a file another
	// build would take must not say main beside flintfunction.
	for _, name := range pkg.IgnoredGoFiles {
		if _, err := renamePackage(filepath.Join(dir, name), false); err != nil && !errors.Is(err, errNotMain) {
			return err
		}
	}
	sort.Strings(names)
	if err := os.Mkdir(outDir, 0o755); err != nil {
		return err
	}
	if err := copyRuntime(runtimeDir, outDir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, "zz_function_main.go"), mainSource(importPath, names), 0o644)
}

var errNotMain = errors.New("not package main")

// renamePackage rewrites the file's package clause and, for a file of the
// build, returns what it exports by name: functions (not methods, not
// generic: those have no value without type arguments) as values, variables
// by address, as plugin.Lookup gives them.
func renamePackage(path string, inBuild bool) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	mode := parser.SkipObjectResolution
	if !inBuild {
		mode |= parser.PackageClauseOnly
	}
	f, err := parser.ParseFile(fset, path, src, mode)
	if err != nil {
		if !inBuild {
			return nil, errNotMain
		}
		return nil, err
	}
	if f.Name.Name != "main" {
		return nil, errNotMain
	}
	var exported []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() && (d.Type.TypeParams == nil || len(d.Type.TypeParams.List) == 0) {
				exported = append(exported, d.Name.Name)
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, spec := range d.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if n.IsExported() {
						exported = append(exported, "&"+n.Name)
					}
				}
			}
		}
	}
	at := fset.Position(f.Name.Pos()).Offset
	if !bytes.HasPrefix(src[at:], []byte("main")) {
		return nil, fmt.Errorf("%s: cannot find its package clause", path)
	}
	renamed := append(append(append([]byte{}, src[:at]...), packageName...), src[at+len("main"):]...)
	return exported, replaceFile(path, renamed)
}

// replaceFile writes a new file in path's place: the source's own may be
// read-only (a single-file package is copied with its mode).
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".genmain-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// copyRuntime copies the runtime's Go sources, tests excepted, each with go1.21
// added to its build constraint.
func copyRuntime(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("the runtime's sources: %v", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, name), withGo121(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// withGo121 adds go1.21 to a Go file's //go:build line, or gives it one.
func withGo121(src []byte) []byte {
	const prefix = "//go:build "
	if bytes.HasPrefix(src, []byte(prefix)) {
		end := bytes.IndexByte(src, '\n')
		if end < 0 {
			end = len(src)
		}
		expr := string(src[len(prefix):end])
		return append([]byte(prefix+"("+expr+") && go1.21"), src[end:]...)
	}
	return append([]byte(prefix+"go1.21\n\n"), src...)
}

func mainSource(importPath string, names []string) []byte {
	var b bytes.Buffer
	b.WriteString("//go:build flintfn && go1.21\n\n// Code generated by flint/go-builder (genmain). DO NOT EDIT.\n\npackage main\n\n")
	if len(names) == 0 {
		fmt.Fprintf(&b, "import _ %s\n\nfunc main() { runFunction(map[string]any{}) }\n", strconv.Quote(importPath))
		return b.Bytes()
	}
	fmt.Fprintf(&b, "import flintuser %s\n\nfunc main() {\n\trunFunction(map[string]any{\n", strconv.Quote(importPath))
	for _, n := range names {
		name, ref := strings.TrimPrefix(n, "&"), "flintuser."+strings.TrimPrefix(n, "&")
		if strings.HasPrefix(n, "&") {
			ref = "&" + ref
		}
		fmt.Fprintf(&b, "\t\t%s: %s,\n", strconv.Quote(name), ref)
	}
	b.WriteString("\t})\n}\n")
	return b.Bytes()
}
