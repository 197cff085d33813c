//go:build !((linux || darwin) && (amd64 || arm64))

package metal

import "errors"

func loadEmu(path string, ks []kernelEntry) (*emuLib, error) {
	return nil, errors.New("metal emulator: only available on linux and darwin (amd64, arm64)")
}

func callDispatch(fn, entry uintptr, args *uintptr, grid, tg *uint32, errb *byte, errlen int) int32 {
	return -1
}
