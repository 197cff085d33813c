package metal

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed kernels/*.metal kernels/int8/*.metal
var kernelFS embed.FS

// librarySource returns the Metal library source: kernels/common.metal
// followed by the other kernel files in name order.
func librarySource() (string, error) {
	names, err := fs.Glob(kernelFS, "kernels/*.metal")
	if err != nil {
		return "", fmt.Errorf("list kernels: %w", err)
	}
	sort.Slice(names, func(i, j int) bool {
		ci, cj := strings.HasSuffix(names[i], "/common.metal"), strings.HasSuffix(names[j], "/common.metal")
		if ci != cj {
			return ci
		}
		return names[i] < names[j]
	})
	return joinKernels(names...)
}

// int8LibrarySource returns the source of the int8 library, compiled apart
// from the float library (it needs Metal 4 tensors and Metal Performance
// Primitives): kernels/int8/mpp.metal followed by int8.metal.
func int8LibrarySource() (string, error) {
	return joinKernels("kernels/int8/mpp.metal", "kernels/int8/int8.metal")
}

// int8ProbeSource returns the source of the int8 probe: kernels/int8/mpp.metal
// (the descriptors, types and tile function of the int8 kernels) followed by
// probe.metal.
func int8ProbeSource() (string, error) {
	return joinKernels("kernels/int8/mpp.metal", "kernels/int8/probe.metal")
}

// int8ProbeKernel is the probe's one kernel, whose pipeline the probe makes.
const int8ProbeKernel = "i8_probe"

func joinKernels(names ...string) (string, error) {
	var b strings.Builder
	for _, n := range names {
		src, err := kernelFS.ReadFile(n)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", n, err)
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", n)
		b.Write(src)
		b.WriteString("\n")
	}
	return b.String(), nil
}

// kernelParam is one parameter of a kernel function.
type kernelParam struct {
	kind   paramKind
	buffer int    // for pointer and reference parameters
	attr   string // for built-in thread position parameters
}

type paramKind int

const (
	paramPointer paramKind = iota
	paramRef
	paramBuiltin
)

// kernelEntry is a kernel the library exports under its host name.
type kernelEntry struct {
	name   string // host name
	fn     string // function name
	targs  string // template arguments, empty for a plain kernel
	params []kernelParam
}

var (
	reKernelDef   = regexp.MustCompile(`(?s)(template\s*<[^>]*>\s*)?kernel\s+void\s+(\w+)\s*\(`)
	reInstantiate = regexp.MustCompile(`INSTANTIATE\(\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*([^\n]*)\)`)
	reAttr        = regexp.MustCompile(`\[\[\s*(\w+)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]`)
	reComment     = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	reMacroBody   = regexp.MustCompile(`(?m)^#define[^\n]*(\\\n[^\n]*)*`)
)

// builtinAttrs are the thread position attributes the emulator supplies.
var builtinAttrs = map[string]bool{
	"thread_position_in_grid":        true,
	"thread_position_in_threadgroup": true,
	"threadgroup_position_in_grid":   true,
	"threads_per_threadgroup":        true,
	"threadgroups_per_grid":          true,
	"threads_per_grid":               true,
	"thread_index_in_threadgroup":    true,
	"simdgroup_index_in_threadgroup": true,
	"thread_index_in_simdgroup":      true,
	"threads_per_simdgroup":          true,
	"simdgroups_per_threadgroup":     true,
}

// parseKernels finds the kernels of a library source: plain kernel functions
// and the named instantiations of kernel templates (INSTANTIATE lines, also
// through INSTANTIATE_ROWS).
func parseKernels(src string) ([]kernelEntry, error) {
	code := reComment.ReplaceAllString(src, "")
	defs := map[string][]kernelParam{}
	templ := map[string]bool{}
	var plain []string
	for _, m := range reKernelDef.FindAllStringSubmatchIndex(code, -1) {
		name := code[m[4]:m[5]]
		open := m[1] - 1
		depth, end := 0, -1
		for i := open; i < len(code); i++ {
			if code[i] == '(' {
				depth++
			} else if code[i] == ')' {
				depth--
				if depth == 0 {
					end = i
					break
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("kernel %s: unbalanced parameter list", name)
		}
		params, err := parseParams(code[open+1 : end])
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		defs[name] = params
		if m[2] >= 0 {
			templ[name] = true
		} else {
			plain = append(plain, name)
		}
	}
	var out []kernelEntry
	for _, n := range plain {
		out = append(out, kernelEntry{name: n, fn: n, params: defs[n]})
	}
	// Expand INSTANTIATE_ROWS by hand: it is the one macro that generates
	// instantiations.
	code = strings.ReplaceAll(code, "\\\n", " ")
	rows := regexp.MustCompile(`INSTANTIATE_ROWS(?:_T)?\(\s*"([^"]+)"\s*,\s*(\w+)\s*(?:,([^\n)]*))?\)`)
	for _, m := range rows.FindAllStringSubmatch(code, -1) {
		extra := ""
		if t := strings.TrimSpace(m[3]); t != "" {
			extra = ", " + t
		}
		for _, f := range []struct{ suf, l string }{
			{"_f32", "PlainRows<WF32>"}, {"_f16", "PlainRows<WF16>"}, {"_bf16", "PlainRows<WBF16>"},
			{"_q_f32", "QuantRows<WF32>"}, {"_q_f16", "QuantRows<WF16>"}, {"_q_bf16", "QuantRows<WBF16>"},
		} {
			code += fmt.Sprintf("\nINSTANTIATE(\"%s%s\", %s, %s%s)\n", m[1], f.suf, m[2], f.l, extra)
		}
	}
	code = reMacroBody.ReplaceAllString(code, "")
	seen := map[string]bool{}
	for _, m := range reInstantiate.FindAllStringSubmatch(code, -1) {
		name, fn, targs := m[1], m[2], strings.TrimSpace(m[3])
		if !templ[fn] {
			return nil, fmt.Errorf("INSTANTIATE %q: %s is not a kernel template", name, fn)
		}
		if seen[name] {
			return nil, fmt.Errorf("kernel host name %q defined twice", name)
		}
		seen[name] = true
		out = append(out, kernelEntry{name: name, fn: fn, targs: targs, params: defs[fn]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// parseParams parses a kernel parameter list.
func parseParams(list string) ([]kernelParam, error) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '(', '<', '[':
			depth++
		case ')', '>', ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, list[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, list[start:])
	var out []kernelParam
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		am := reAttr.FindStringSubmatch(p)
		if am == nil {
			return nil, fmt.Errorf("parameter %q has no attribute", p)
		}
		decl := p[:strings.Index(p, "[[")]
		switch {
		case am[1] == "buffer":
			n, _ := strconv.Atoi(am[2])
			k := paramPointer
			if strings.Contains(decl, "&") {
				k = paramRef
			} else if !strings.Contains(decl, "*") {
				return nil, fmt.Errorf("buffer parameter %q is neither a pointer nor a reference", p)
			}
			out = append(out, kernelParam{kind: k, buffer: n})
		case builtinAttrs[am[1]]:
			out = append(out, kernelParam{kind: paramBuiltin, attr: am[1]})
		default:
			return nil, fmt.Errorf("parameter %q: attribute %s is not supported", p, am[1])
		}
	}
	return out, nil
}

// emuEntries generates the extern "C" entry of every kernel for the
// emulator: it unpacks the buffer table and the thread position.
func emuEntries(ks []kernelEntry) string {
	field := map[string]string{
		"thread_position_in_grid":        "EmuVec{p->tpig}",
		"thread_position_in_threadgroup": "EmuVec{p->tpitg}",
		"threadgroup_position_in_grid":   "EmuVec{p->tgpig}",
		"threads_per_threadgroup":        "EmuVec{p->tptg}",
		"threadgroups_per_grid":          "EmuVec{p->tgpg}",
		"threads_per_grid":               "EmuVec{p->tpg}",
		"thread_index_in_threadgroup":    "EmuScalar{p->tiitg}",
		"simdgroup_index_in_threadgroup": "EmuScalar{p->sgitg}",
		"thread_index_in_simdgroup":      "EmuScalar{p->tiisg}",
		"threads_per_simdgroup":          "EmuScalar{p->tpsg}",
		"simdgroups_per_threadgroup":     "EmuScalar{p->sgptg}",
	}
	var b strings.Builder
	for _, k := range ks {
		fn := k.fn
		if k.targs != "" {
			fn += "<" + k.targs + ">"
		}
		fmt.Fprintf(&b, "extern \"C\" void emu_k_%s(void** a, const EmuPos* p) {\n  (void)a; (void)p;\n  %s(", k.name, fn)
		for i, p := range k.params {
			if i > 0 {
				b.WriteString(", ")
			}
			switch p.kind {
			case paramPointer:
				fmt.Fprintf(&b, "EmuBuf{a[%d]}", p.buffer)
			case paramRef:
				fmt.Fprintf(&b, "EmuRef{a[%d]}", p.buffer)
			default:
				b.WriteString(field[p.attr])
			}
		}
		b.WriteString(");\n}\n")
	}
	return b.String()
}
