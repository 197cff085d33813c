package doctor

import (
	"strings"

	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/model"
)

// Int8 is the kernel of MatMul over int8 weights this machine runs.
type Int8 struct {
	Check
	// Kernel names it ("" when there is none).
	Kernel string `json:"kernel"`
	// Backend is the backend auto picks, whose kernel it is.
	Backend string `json:"backend"`
}

// checkInt8 reports the int8 kernel of the backend auto picks, as a load
// with int8 on would use it, or why that backend has none.
func checkInt8() Int8 {
	be, _, err := backends.Auto(0)
	if err != nil {
		return Int8{Check: failed(err)}
	}
	if cl, ok := be.(interface{ Close() }); ok {
		defer cl.Close()
	}
	k, err := model.Int8Kernel(be)
	if err != nil {
		return Int8{Check: failedf("%s", strings.TrimPrefix(err.Error(), "int8: ")), Backend: be.Name()}
	}
	return Int8{Check: ok(), Kernel: k, Backend: be.Name()}
}
