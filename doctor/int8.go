package doctor

import (
	"strings"

	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// Int8 is the kernel of MatMul over int8 weights this machine runs: that of
// the backend auto picks, as a load with int8 on would use it.
type Int8 struct {
	Check
	// Kernel names it ("avx2", "mpp-matmul2d"; "" when there is none, the
	// reason then saying why).
	Kernel string `json:"kernel"`
	// Backend is the backend auto picks, whose kernel it is ("" when auto
	// opened none).
	Backend string `json:"backend"`
}

// checkInt8 reports the int8 kernel of be, the backend auto picked, or why
// it has none.
func checkInt8(be tensor.Backend) Int8 {
	if be == nil {
		return Int8{Check: failedf("auto opened no backend (see the backend check)")}
	}
	k, err := model.Int8Kernel(be)
	if err != nil {
		return Int8{Check: failedf("%s", strings.TrimPrefix(err.Error(), "int8: ")), Backend: be.Name()}
	}
	return Int8{Check: ok(), Kernel: k, Backend: be.Name()}
}
