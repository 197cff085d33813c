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

// sendNames are the calls that send an Objective-C message (or read an
// autoreleased object), by the name called and the least number of
// arguments: ID.Send, the Runtime's typed senders and conversions, and the
// fields of a package's own table of typed senders (a struct type named
// msgs).
func sendNames(files []darwinFile) map[string]int {
	names := map[string]int{
		"Send": 1, "SendUint": 2, "SendUint64": 2, "SendInt": 2, "SendBool": 2, "SendPtr": 2,
		"SendBoolInt": 3, "SendBoolPtr": 3, "NSString": 1, "GoString": 1, "Error": 1,
	}
	for _, df := range files {
		ast.Inspect(df.f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "msgs" {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					for _, nm := range fl.Names {
						names[nm.Name] = 2
					}
				}
			}
			return false
		})
	}
	return names
}

// funcKey names a top-level function of a package: methods by "recv.name"
// are matched by name alone ("." + name), plain functions by name.
type funcKey struct{ pkg, name string }

// poolCheck is the analysis of one package's darwin files.
type poolCheck struct {
	sends map[string]int
	// funcs and methods declared in the package's darwin files.
	funcs, methods map[string]*ast.FuncDecl
}

// isPoolCall reports whether call is x.Pool(func() {...}).
func isPoolCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Pool" && len(call.Args) == 1
}

// callee classifies a call: a message send, a call of a package function
// (its key), or neither.
func (c *poolCheck) callee(call *ast.CallExpr) (send bool, key string) {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		if n, ok := c.sends[fn.Sel.Name]; ok && len(call.Args) >= n {
			return true, ""
		}
		if _, ok := c.methods[fn.Sel.Name]; ok {
			return false, "." + fn.Sel.Name
		}
	case *ast.Ident:
		if _, ok := c.funcs[fn.Name]; ok {
			return false, fn.Name
		}
	}
	return false, ""
}

// outside calls visit for every call in body that is not inside the
// function literal of a Pool call.
func outside(body ast.Node, visit func(*ast.CallExpr)) {
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if isPoolCall(call) {
			return false
		}
		visit(call)
		return true
	})
}

// TestAutoreleasePools checks that every Objective-C message of the darwin
// code is sent inside an autorelease pool (objcrt.Runtime.Pool): Go's
// threads never exit, so objects autoreleased outside a pool would pile up
// for the life of the daemon or the app. A function that sends outside a
// pool of its own is accepted only when every call of it lies inside a
// pool, or inside another function so accepted; the functions nothing in
// the file calls (the driver's methods, the System's, RunTray, callbacks)
// must therefore open their own. The objcrt package itself provides the
// building blocks, which document that they run inside a caller's pool.
func TestAutoreleasePools(t *testing.T) {
	files := darwinFiles(t)
	sends := sendNames(files)
	byPkg := map[string][]darwinFile{}
	for _, df := range files {
		if df.f.Name.Name == "objcrt" {
			continue
		}
		dir := filepath.Dir(df.path)
		byPkg[dir] = append(byPkg[dir], df)
	}
	for dir, pkgFiles := range byPkg {
		c := &poolCheck{sends: sends, funcs: map[string]*ast.FuncDecl{}, methods: map[string]*ast.FuncDecl{}}
		for _, df := range pkgFiles {
			for _, d := range df.f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					if fd.Recv != nil {
						c.methods[fd.Name.Name] = fd
					} else {
						c.funcs[fd.Name.Name] = fd
					}
				}
			}
		}
		// The units of code: top-level functions, and package-level
		// variables whose initialisers hold function literals.
		type unit struct {
			key  string
			body ast.Node
			df   darwinFile
		}
		var units []unit
		for _, df := range pkgFiles {
			for _, d := range df.f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Body == nil {
						continue
					}
					key := d.Name.Name
					if d.Recv != nil {
						key = "." + key
					}
					units = append(units, unit{key, d.Body, df})
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if v, ok := s.(*ast.ValueSpec); ok {
							for _, val := range v.Values {
								units = append(units, unit{"var " + v.Names[0].Name, val, df})
							}
						}
					}
				}
			}
		}
		// sender[k]: k sends outside a pool of its own (directly or by
		// calling a sender), with the first such call for the message.
		sender := map[string]token.Pos{}
		for changed := true; changed; {
			changed = false
			for _, u := range units {
				if _, done := sender[u.key]; done {
					continue
				}
				outside(u.body, func(call *ast.CallExpr) {
					if _, done := sender[u.key]; done {
						return
					}
					send, key := c.callee(call)
					if _, calleeSends := sender[key]; send || (key != "" && calleeSends) {
						sender[u.key] = call.Pos()
						changed = true
					}
				})
			}
		}
		// A sender is covered when it is called and every call is inside a
		// pool or inside a covered sender: start from "every called sender
		// is covered" and drop the ones with a call outside, until stable.
		called := map[string]bool{}
		for _, u := range units {
			ast.Inspect(u.body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if _, key := c.callee(call); key != "" {
					called[key] = true
				}
				// Pool(d.commit): a method value run inside the pool.
				if isPoolCall(call) {
					if _, key := c.callee(&ast.CallExpr{Fun: call.Args[0]}); key != "" {
						called[key] = true
					}
				}
				return true
			})
		}
		// A sender nothing here calls is an entry point: not covered.
		covered := map[string]bool{}
		for k := range sender {
			covered[k] = called[k]
		}
		for changed := true; changed; {
			changed = false
			for _, u := range units {
				outside(u.body, func(call *ast.CallExpr) {
					_, key := c.callee(call)
					if _, ok := sender[key]; !ok {
						return
					}
					if !covered[u.key] && covered[key] {
						covered[key] = false
						changed = true
					}
				})
			}
		}
		for _, u := range units {
			pos, ok := sender[u.key]
			if !ok || covered[u.key] {
				continue
			}
			t.Errorf("%s: %s sends Objective-C messages outside an autorelease pool (first at %s); wrap them in Runtime.Pool",
				dir, strings.TrimPrefix(u.key, "."), u.df.fset.Position(pos))
		}
	}
}
