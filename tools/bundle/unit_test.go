package bundle

import (
	"bytes"
	"debug/macho"
	"encoding/binary"
	"image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/startlux/startlux/app/icon"
)

// thinMachO makes a minimal 64-bit little-endian Mach-O: a header with no
// load commands, then n filler bytes.
func thinMachO(cpu macho.Cpu, sub uint32, n int, fill byte) []byte {
	b := make([]byte, 32+n)
	le := binary.LittleEndian
	le.PutUint32(b[0:], macho.Magic64)
	le.PutUint32(b[4:], uint32(cpu))
	le.PutUint32(b[8:], sub)
	le.PutUint32(b[12:], uint32(macho.TypeExec))
	for i := 32; i < len(b); i++ {
		b[i] = fill
	}
	return b
}

func TestUniversal(t *testing.T) {
	arm := thinMachO(macho.CpuArm64, 0, 5000, 0xA1)
	x86 := thinMachO(macho.CpuAmd64, 3, 7000, 0x86)
	fat, err := Universal(arm, x86)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := macho.NewFatFile(bytes.NewReader(fat))
	if err != nil {
		t.Fatalf("debug/macho cannot read the result: %v", err)
	}
	if len(ff.Arches) != 2 {
		t.Fatalf("%d arches", len(ff.Arches))
	}
	want := []struct {
		cpu   macho.Cpu
		sub   uint32
		align uint32
		data  []byte
	}{{macho.CpuAmd64, 3, 12, x86}, {macho.CpuArm64, 0, 14, arm}}
	for i, w := range want {
		a := ff.Arches[i]
		if a.Cpu != w.cpu || a.SubCpu != w.sub || a.Align != w.align {
			t.Errorf("arch %d: cpu %v sub %d align %d, want %v %d %d", i, a.Cpu, a.SubCpu, a.Align, w.cpu, w.sub, w.align)
		}
		if a.Offset%(1<<a.Align) != 0 {
			t.Errorf("arch %d offset %d not aligned to 2^%d", i, a.Offset, a.Align)
		}
		if !bytes.Equal(fat[a.Offset:a.Offset+a.Size], w.data) {
			t.Errorf("arch %d: slice bytes differ from the input", i)
		}
	}
	if ff.Arches[0].Offset+ff.Arches[0].Size > ff.Arches[1].Offset {
		t.Errorf("slices overlap")
	}
	if got := len(fat); got != int(ff.Arches[1].Offset+ff.Arches[1].Size) {
		t.Errorf("file is %d bytes, last slice ends at %d", got, ff.Arches[1].Offset+ff.Arches[1].Size)
	}
}

func TestUniversalErrors(t *testing.T) {
	arm := thinMachO(macho.CpuArm64, 0, 10, 1)
	tests := []struct {
		name   string
		slices [][]byte
		want   string
	}{
		{"none", nil, "no slices"},
		{"duplicate", [][]byte{arm, arm}, "repeats architecture"},
		{"not macho", [][]byte{arm, []byte("#!/bin/sh\necho hi\n")}, "slice 1 is not a thin Mach-O"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Universal(tt.slices...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestICNSRejectsWrongSize(t *testing.T) {
	bySize := map[int][]byte{}
	for _, e := range IconEntries() {
		b, err := icon.PNG(icon.App(e.Size))
		if err != nil {
			t.Fatal(err)
		}
		bySize[e.Size] = b
	}
	if _, err := ICNS(bySize); err != nil {
		t.Fatalf("complete set: %v", err)
	}
	good64 := bySize[64]
	bySize[64] = bySize[32]
	if _, err := ICNS(bySize); err == nil || !strings.Contains(err.Error(), "ic12 wants 64×64") {
		t.Errorf("wrong size: err = %v", err)
	}
	bySize[64] = good64
	delete(bySize, 1024)
	if _, err := ICNS(bySize); err == nil || !strings.Contains(err.Error(), "no 1024×1024") {
		t.Errorf("missing size: err = %v", err)
	}
}

func TestAppIconIsOpaqueInsideTransparentOutside(t *testing.T) {
	img := icon.App(128)
	b, err := icon.PNG(img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if a := img.NRGBAAt(2, 2).A; a != 0 {
		t.Errorf("corner alpha %d, want 0 (macOS icons leave a margin)", a)
	}
	if c := img.NRGBAAt(64, 64); c.A != 255 || c.R != 255 || c.G != 255 || c.B != 255 {
		t.Errorf("centre %v, want the white mark", c)
	}
	if c := img.NRGBAAt(20, 64); c.A != 255 || c.B > 0x80 {
		t.Errorf("background %v, want opaque orange", c)
	}
}

func TestParsePlist(t *testing.T) {
	const head = `<?xml version="1.0" encoding="UTF-8"?><plist version="1.0">`
	tests := []struct {
		name string
		in   string
		want any
		err  string
	}{
		{"dict", `<dict><key>a</key><string>x &amp; y</string><key>b</key><true/><key>c</key><integer>-7</integer>
			<key>d</key><array><real>1.5</real><false/><data>aGk=</data></array></dict>`,
			map[string]any{"a": "x & y", "b": true, "c": int64(-7), "d": []any{1.5, false, []byte("hi")}}, ""},
		{"empty dict", `<dict/>`, map[string]any{}, ""},
		{"duplicate key", `<dict><key>a</key><true/><key>a</key><false/></dict>`, nil, `key "a" appears twice`},
		{"key without value", `<dict><key>a</key></dict>`, nil, `key "a" has no value`},
		{"value without key", `<dict><string>a</string></dict>`, nil, "without a <key>"},
		{"bad integer", `<integer>x</integer>`, nil, "<integer>"},
		{"unknown element", `<thing/>`, nil, "unknown element <thing>"},
		{"two values", `<true/><false/>`, nil, "more than one value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePlist([]byte(head + tt.in + `</plist>`))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestFillInfoPlist(t *testing.T) {
	tmpl := []byte(`<plist><dict><key>CFBundleShortVersionString</key><string>$(STARTLUX_VERSION)</string>` +
		`<key>CFBundleVersion</key><string>$(STARTLUX_BUILD)</string></dict></plist>`)
	out, err := FillInfoPlist(tmpl, "0.3.1", "17")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := ParsePlist(out)
	if d := v.(map[string]any); d["CFBundleShortVersionString"] != "0.3.1" || d["CFBundleVersion"] != "17" {
		t.Errorf("filled plist %v", d)
	}
	for _, tt := range []struct{ version, build, tmpl, want string }{
		{"v1.0", "1", string(tmpl), "version \"v1.0\""},
		{"1.0.0.1", "1", string(tmpl), "version \"1.0.0.1\""},
		{"1.0", "abc", string(tmpl), "build \"abc\""},
		{"1.0", "1", `<plist><string>$(STARTLUX_VERSION)$(OTHER)</string></plist>`, "unknown variable $(OTHER)"},
		{"1.0", "1", `<plist><string>$(STARTLUX_VERSION)</string></plist>`, "want a dictionary"},
		{"1.0", "1", `<plist><dict/></plist>`, "lacks $(STARTLUX_VERSION)"},
	} {
		if _, err := FillInfoPlist([]byte(tt.tmpl), tt.version, tt.build); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FillInfoPlist(%q, %q): err = %v, want one containing %q", tt.version, tt.build, err, tt.want)
		}
	}
}

func TestCheckCaseClash(t *testing.T) {
	if err := checkCaseClash(map[string][]byte{"MacOS/StartLux": nil, "Helpers/startlux": nil}); err != nil {
		t.Errorf("distinct folders: %v", err)
	}
	if err := checkCaseClash(map[string][]byte{"MacOS/StartLux": nil, "MacOS/startlux": nil}); err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Errorf("clashing names: err = %v", err)
	}
}
