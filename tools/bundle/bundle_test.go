package bundle

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"debug/macho"
	"encoding/binary"
	"fmt"
	"hash"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/internal/testenv"
)

// lcCodeSignature is LC_CODE_SIGNATURE, the load command that points at a
// Mach-O's embedded signature (a linkedit_data_command).
const lcCodeSignature = 0x1d

// TestBuild builds the real bundle once (cross-compiling both executables
// for both architectures and signing them with quill) and checks it as
// macOS would read it.
func TestBuild(t *testing.T) {
	testenv.LookPath(t, "go", "the Go toolchain")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := t.TempDir()
	var log bytes.Buffer
	app, err := Build(ctx, Config{ModuleRoot: "../..", OutDir: out, Version: "1.2.3", Build: "42", Signing: SignQuillAdHoc, Log: &log})
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}

	t.Run("Info.plist", func(t *testing.T) {
		info := readPlistDict(t, filepath.Join(app, "Contents/Info.plist"))
		want := map[string]any{
			"CFBundleIdentifier":         "dev.startlux.StartLux",
			"CFBundleExecutable":         "StartLux",
			"CFBundlePackageType":        "APPL",
			"CFBundleShortVersionString": "1.2.3",
			"CFBundleVersion":            "42",
			"LSUIElement":                true,
			"LSMinimumSystemVersion":     "13.0",
			"CFBundleIconFile":           "AppIcon",
		}
		for k, v := range want {
			if info[k] != v {
				t.Errorf("Info.plist %s = %#v, want %#v", k, info[k], v)
			}
		}
		if _, err := os.Stat(filepath.Join(app, "Contents/MacOS", info["CFBundleExecutable"].(string))); err != nil {
			t.Errorf("CFBundleExecutable: %v", err)
		}
		if _, err := os.Stat(filepath.Join(app, "Contents/Resources", info["CFBundleIconFile"].(string)+".icns")); err != nil {
			t.Errorf("CFBundleIconFile: %v", err)
		}
	})

	t.Run("executables", func(t *testing.T) {
		// Every Mach-O file anywhere in the bundle, found by its magic.
		var names []string
		err := filepath.WalkDir(app, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if len(b) >= 4 && (binary.BigEndian.Uint32(b) == 0xcafebabe || binary.LittleEndian.Uint32(b) == 0xfeedfacf) {
				rel, _ := filepath.Rel(app, p)
				names = append(names, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"Contents/Helpers/startlux", "Contents/MacOS/StartLux"}; !slices.Equal(names, want) {
			t.Errorf("the bundle's executables are %q, want %q", names, want)
		}
		idents := map[string]string{"Contents/MacOS/StartLux": "dev.startlux.StartLux", "Contents/Helpers/startlux": "dev.startlux.startlux"}
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				p := filepath.Join(app, name)
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode()&0o111 == 0 {
					t.Errorf("mode %v is not executable", st.Mode())
				}
				checkUniversalSigned(t, p, idents[name])
			})
		}
	})

	t.Run("case-insensitive names", func(t *testing.T) {
		// macOS file systems ignore case by default: no two paths may
		// differ only in case.
		seen := map[string]string{}
		filepath.WalkDir(app, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if other, ok := seen[strings.ToLower(p)]; ok {
				t.Errorf("%s and %s differ only in case", other, p)
			}
			seen[strings.ToLower(p)] = p
			return nil
		})
	})

	t.Run("LaunchAgent", func(t *testing.T) {
		agent := readPlistDict(t, filepath.Join(app, "Contents/Library/LaunchAgents/dev.startlux.daemon.plist"))
		for k, v := range map[string]any{"Label": "dev.startlux.daemon", "ProcessType": "Interactive", "KeepAlive": true, "LimitLoadToSessionType": "Aqua"} {
			if agent[k] != v {
				t.Errorf("agent %s = %#v, want %#v", k, agent[k], v)
			}
		}
		prog, _ := agent["BundleProgram"].(string)
		st, err := os.Stat(filepath.Join(app, prog))
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("BundleProgram %q is not an executable in the bundle (%v)", prog, err)
		}
		args, _ := agent["ProgramArguments"].([]any)
		if !slices.Contains(args, any("serve")) {
			t.Errorf("ProgramArguments %v lack serve", args)
		}
	})

	t.Run("icons", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(app, "Contents/Resources/AppIcon.icns"))
		if err != nil {
			t.Fatal(err)
		}
		checkICNS(t, data)
		for name, size := range map[string]int{"MenuBarTemplate.png": 18, "MenuBarTemplate@2x.png": 36} {
			f, err := os.Open(filepath.Join(app, "Contents/Resources", name))
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if b := img.Bounds(); b.Dx() != size || b.Dy() != size {
				t.Errorf("%s is %v, want %d×%d", name, b, size, size)
			}
			opaque := 0
			for y := range size {
				for x := range size {
					r, g, b, a := img.At(x, y).RGBA()
					if r != 0 || g != 0 || b != 0 {
						t.Fatalf("%s: pixel (%d,%d) is not black: %d %d %d %d", name, x, y, r, g, b, a)
					}
					if a > 0xf000 {
						opaque++
					}
				}
			}
			if opaque < size*size/10 || opaque > size*size/2 {
				t.Errorf("%s: %d of %d pixels opaque: not a mark", name, opaque, size*size)
			}
		}
	})

	t.Run("zip", func(t *testing.T) {
		z := filepath.Join(out, "StartLux.zip")
		if err := Zip(app, z); err != nil {
			t.Fatal(err)
		}
		zr, err := zip.OpenReader(z)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		found := map[string]bool{}
		for _, f := range zr.File {
			found[f.Name] = true
			if (strings.HasPrefix(f.Name, "StartLux.app/Contents/MacOS/") || strings.HasPrefix(f.Name, "StartLux.app/Contents/Helpers/")) && !f.FileInfo().IsDir() {
				if f.Mode()&0o111 == 0 {
					t.Errorf("%s lost its executable bits: %v", f.Name, f.Mode())
				}
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(out, f.Name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs in the zip", f.Name)
				}
			}
		}
		for _, n := range []string{"StartLux.app/Contents/Info.plist", "StartLux.app/Contents/MacOS/StartLux", "StartLux.app/Contents/Helpers/startlux", "StartLux.app/Contents/Library/LaunchAgents/dev.startlux.daemon.plist"} {
			if !found[n] {
				t.Errorf("zip lacks %s", n)
			}
		}
	})
}

func readPlistDict(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParsePlist(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	d, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: root is %T", path, v)
	}
	return d
}

// checkUniversalSigned checks path is a universal Mach-O with an arm64 and
// an x86_64 slice, each carrying an embedded signature whose code directory
// names identifier and whose page hashes match the slice's bytes.
func checkUniversalSigned(t *testing.T, path, identifier string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := macho.NewFatFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a universal Mach-O: %v", err)
	}
	defer ff.Close()
	var cpus []macho.Cpu
	for _, a := range ff.Arches {
		cpus = append(cpus, a.Cpu)
		if a.Offset%(1<<a.Align) != 0 {
			t.Errorf("%v slice at offset %d is not aligned to 2^%d", a.Cpu, a.Offset, a.Align)
		}
		slice := data[a.Offset : a.Offset+a.Size]
		if err := verifySignature(a.File, slice, identifier); err != nil {
			t.Errorf("%v slice: %v", a.Cpu, err)
		}
		// The check must see a changed byte: flip one in the middle of the
		// signed code.
		bad := bytes.Clone(slice)
		bad[len(bad)/3] ^= 0xff
		if err := verifySignature(a.File, bad, identifier); err == nil || !strings.Contains(err.Error(), "hash mismatch") {
			t.Errorf("%v slice with a flipped byte: err = %v, want a page hash mismatch", a.Cpu, err)
		}
	}
	slices.Sort(cpus)
	if want := []macho.Cpu{macho.CpuAmd64, macho.CpuArm64}; !slices.Equal(cpus, want) {
		t.Errorf("architectures %v, want %v", cpus, want)
	}
}

// verifySignature reads the slice's LC_CODE_SIGNATURE and checks the code
// directory in its superblob: the identifier, that it covers every byte up
// to the signature, and every page hash.
func verifySignature(f *macho.File, slice []byte, identifier string) error {
	be := binary.BigEndian
	var dataoff, datasize uint32
	found := false
	for _, l := range f.Loads {
		raw := l.Raw()
		if f.ByteOrder.Uint32(raw) == lcCodeSignature {
			dataoff, datasize = f.ByteOrder.Uint32(raw[8:]), f.ByteOrder.Uint32(raw[12:])
			found = true
		}
	}
	if !found {
		return fmt.Errorf("no LC_CODE_SIGNATURE")
	}
	if uint64(dataoff)+uint64(datasize) > uint64(len(slice)) {
		return fmt.Errorf("signature %d+%d runs past the slice (%d bytes)", dataoff, datasize, len(slice))
	}
	sb := slice[dataoff : dataoff+datasize]
	if be.Uint32(sb) != 0xfade0cc0 {
		return fmt.Errorf("superblob magic %#x", be.Uint32(sb))
	}
	count := be.Uint32(sb[8:])
	var cd []byte
	for i := range count {
		typ, off := be.Uint32(sb[12+8*i:]), be.Uint32(sb[16+8*i:])
		if typ == 0 { // CSSLOT_CODEDIRECTORY
			cd = sb[off:]
		}
	}
	if cd == nil || be.Uint32(cd) != 0xfade0c02 {
		return fmt.Errorf("no code directory")
	}
	cd = cd[:be.Uint32(cd[4:])]
	flags := be.Uint32(cd[12:])
	hashOffset, identOffset := be.Uint32(cd[16:]), be.Uint32(cd[20:])
	nCodeSlots, codeLimit := be.Uint32(cd[28:]), be.Uint32(cd[32:])
	hashSize, hashType, pageShift := int(cd[36]), cd[37], cd[39]
	if flags&0x2 == 0 {
		return fmt.Errorf("code directory flags %#x lack adhoc", flags)
	}
	ident := cd[identOffset:]
	ident = ident[:bytes.IndexByte(ident, 0)]
	if string(ident) != identifier {
		return fmt.Errorf("identifier %q, want %q", ident, identifier)
	}
	if codeLimit != dataoff {
		return fmt.Errorf("code limit %d, signature starts at %d", codeLimit, dataoff)
	}
	var h hash.Hash
	switch hashType {
	case 1:
		h = sha1.New()
	case 2:
		h = sha256.New()
	default:
		return fmt.Errorf("hash type %d", hashType)
	}
	page := 1 << pageShift
	if want := (int(codeLimit) + page - 1) / page; int(nCodeSlots) != want {
		return fmt.Errorf("%d code slots, want %d", nCodeSlots, want)
	}
	for i := range int(nCodeSlots) {
		h.Reset()
		h.Write(slice[i*page : min((i+1)*page, int(codeLimit))])
		got := cd[int(hashOffset)+i*hashSize : int(hashOffset)+(i+1)*hashSize]
		if !bytes.Equal(h.Sum(nil)[:hashSize], got) {
			return fmt.Errorf("page %d hash mismatch", i)
		}
	}
	return nil
}

// checkICNS walks an icns container and decodes every entry.
func checkICNS(t *testing.T, data []byte) {
	t.Helper()
	if string(data[:4]) != "icns" || int(binary.BigEndian.Uint32(data[4:])) != len(data) {
		t.Fatalf("icns header %q %d, file is %d bytes", data[:4], binary.BigEndian.Uint32(data[4:]), len(data))
	}
	want := map[string]int{}
	for _, e := range IconEntries() {
		want[e.Type] = e.Size
	}
	for off := 8; off < len(data); {
		typ, n := string(data[off:off+4]), int(binary.BigEndian.Uint32(data[off+4:]))
		if n < 8 || off+n > len(data) {
			t.Fatalf("entry %s length %d at %d overruns the file", typ, n, off)
		}
		img, err := png.Decode(bytes.NewReader(data[off+8 : off+n]))
		if err != nil {
			t.Fatalf("entry %s: %v", typ, err)
		}
		size, ok := want[typ]
		if !ok {
			t.Errorf("unexpected entry %s", typ)
		}
		if b := img.Bounds(); b.Dx() != size || b.Dy() != size {
			t.Errorf("entry %s is %v, want %d×%d", typ, b, size, size)
		}
		delete(want, typ)
		off += n
	}
	if len(want) != 0 {
		t.Errorf("missing entries %v", want)
	}
}
