//go:build (linux || darwin) && (amd64 || arm64)

package metal

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// loadEmu opens the emulator library and resolves every kernel entry.
func loadEmu(path string, ks []kernelEntry) (*emuLib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("metal emulator: load %s: %w", path, err)
	}
	l := &emuLib{entries: map[string]uintptr{}}
	if l.dispatch, err = purego.Dlsym(h, "emu_dispatch"); err != nil {
		return nil, fmt.Errorf("metal emulator: %w", err)
	}
	for _, k := range ks {
		p, err := purego.Dlsym(h, "emu_k_"+k.name)
		if err != nil {
			return nil, fmt.Errorf("metal emulator: kernel %s: %w", k.name, err)
		}
		l.entries[k.name] = p
	}
	return l, nil
}

func callDispatch(fn, entry uintptr, args *uintptr, grid, tg *uint32, errb *byte, errlen int) int32 {
	r, _, _ := purego.SyscallN(fn, entry, uintptr(unsafe.Pointer(args)), uintptr(unsafe.Pointer(grid)),
		uintptr(unsafe.Pointer(tg)), uintptr(unsafe.Pointer(errb)), uintptr(errlen))
	return int32(r)
}
