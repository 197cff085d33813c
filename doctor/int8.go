package doctor

import (
	"github.com/startlux/startlux/tensor"
)

// Int8 is the kernel of MatMul over int8 weights on the backend auto picks
// (tensor.Int8Backend's Int8Kernel).
type Int8 struct {
	Check
	// Backend is the backend asked ("" when auto opened none).
	Backend string `json:"backend"`
	// Kernel names the int8 kernel ("avx2", "mpp-matmul2d"; "" when there
	// is none, the reason then saying why).
	Kernel string `json:"kernel"`
}

// checkInt8 asks be, the backend auto picked, for its int8 kernel.
func checkInt8(be tensor.Backend) Int8 {
	if be == nil {
		return Int8{Check: failedf("auto opened no backend (see the backend check)")}
	}
	r := Int8{Backend: be.Name()}
	ib, isInt8 := be.(tensor.Int8Backend)
	if !isInt8 {
		r.Check = failedf("the %s backend has no int8 kernels", be.Name())
		return r
	}
	name, err := ib.Int8Kernel()
	if err != nil {
		r.Check = failed(err)
		return r
	}
	r.Check, r.Kernel = ok(), name
	return r
}
