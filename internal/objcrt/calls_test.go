package objcrt

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The darwin code cannot run here, but how it calls into Objective-C can be
// read. These tests parse every darwin file of the module that talks to the
// Objective-C runtime and hold it to the rules this package exists for.

const objcImport = "github.com/ebitengine/purego/objc"

// darwinFile is a parsed file that imports purego's objc package.
type darwinFile struct {
	path string
	fset *token.FileSet
	f    *ast.File
}

// darwinFiles parses the module's *_darwin.go files that import objc.
func darwinFiles(t *testing.T) []darwinFile {
	t.Helper()
	root := filepath.Join("..", "..")
	var out []darwinFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_darwin.go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if v, _ := strconv.Unquote(im.Path.Value); v == objcImport {
				out = append(out, darwinFile{p, fset, f})
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 4 {
		t.Fatalf("found %d darwin files that use objc, want the metal binding, the app's three and this package's", len(out))
	}
	return out
}

// selectorCall returns "pkg.Name" for a call of a package-level function
// (including an instantiation such as objc.Send[T]), else "".
func selectorCall(call *ast.CallExpr) string {
	fun := call.Fun
	switch x := fun.(type) {
	case *ast.IndexExpr:
		fun = x.X
	case *ast.IndexListExpr:
		fun = x.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return id.Name + "." + sel.Sel.Name
}

// enclosingFunc names the top-level declaration a position lies in: the
// function or method name, or "var NAME" for a package-level variable.
func enclosingFunc(f *ast.File, pos token.Pos) string {
	for _, d := range f.Decls {
		if pos < d.Pos() || pos >= d.End() {
			continue
		}
		switch d := d.(type) {
		case *ast.FuncDecl:
			return d.Name.Name
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if v, ok := s.(*ast.ValueSpec); ok && pos >= v.Pos() && pos < v.End() {
					return "var " + v.Names[0].Name
				}
			}
		}
	}
	return ""
}

// setUp lists where functions may be registered and selectors resolved:
// code that runs once per process or once per driver, never per message.
var setUp = map[string]bool{
	"var Load":        true, // objcrt: the runtime, once per process
	"Register":        true, // objcrt: called only from set-up code (checked below)
	"var loadObjC":    true, // app: selectors and classes, once per process
	"var targetClass": true, // app: the menu target class, once per process
	"newSels":         true, // metal: selectors, once per driver
	"newMsgs":         true, // metal: typed senders, once per driver
	"loadMetal":       true, // metal: MTLCopyAllDevices, once per driver
}

// TestRegisteredOnce checks that no darwin code registers a function with
// purego or resolves a selector on the way of a message: purego's generic
// objc.Send[T] (which registers objc_msgSend through reflection on every
// call) is not used, and RegisterFunc, RegisterLibFunc, objcrt.Register and
// objc.RegisterName are called only from set-up code.
func TestRegisteredOnce(t *testing.T) {
	registering := map[string]bool{
		"purego.RegisterFunc": true, "purego.RegisterLibFunc": true,
		"objcrt.Register": true, "objc.RegisterName": true,
		// Inside this package Register is called unqualified.
		"Register": true,
	}
	for _, df := range darwinFiles(t) {
		ast.Inspect(df.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := selectorCall(call)
			if id, ok := call.Fun.(*ast.Ident); ok && df.f.Name.Name == "objcrt" {
				name = id.Name
			}
			where := enclosingFunc(df.f, call.Pos())
			switch {
			case name == "objc.Send" || name == "objc.SendSuper":
				if _, generic := call.Fun.(*ast.IndexExpr); generic || len(call.Args) > 0 {
					t.Errorf("%s: %s in %s registers objc_msgSend on every call; use a typed sender registered once (objcrt.Register)",
						df.fset.Position(call.Pos()), name, where)
				}
			case registering[name] && !setUp[where]:
				t.Errorf("%s: %s in %s: register functions and resolve selectors once, in set-up code",
					df.fset.Position(call.Pos()), name, where)
			case name == "time.Sleep":
				t.Errorf("%s: time.Sleep in %s: wait with waitUntilCompleted or a completion handler, not by polling",
					df.fset.Position(call.Pos()), where)
			}
			return true
		})
	}
}
