//go:build linux || darwin

package cpu

import (
	"os"

	"github.com/ebitengine/purego"
)

// blasEnv names an environment variable that, when set, is the path of the
// BLAS library to load instead of the platform's default list ("none"
// disables BLAS).
const blasEnv = "STARTLUX_BLAS"

// loadBLAS loads the first BLAS library that opens and exports cblas_sgemm,
// or returns nil. It sets OpenBLAS to one thread: the backend parallelises
// over tiles with its own goroutines, each making single-threaded calls.
func loadBLAS() *blasLib {
	cands := blasCandidates()
	if p := os.Getenv(blasEnv); p != "" {
		if p == "none" {
			return nil
		}
		cands = []blasCandidate{{path: p, name: "blas"}}
	}
	for _, c := range cands {
		h, err := purego.Dlopen(c.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			continue
		}
		sym, err := purego.Dlsym(h, "cblas_sgemm")
		if err != nil || sym == 0 {
			purego.Dlclose(h)
			continue
		}
		lib := &blasLib{name: c.name}
		purego.RegisterFunc(&lib.sgemm, sym)
		if s, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil && s != 0 {
			purego.RegisterFunc(&lib.setThreads, s)
			lib.name = "openblas"
		}
		if lib.setThreads != nil {
			lib.setThreads(1)
		}
		return lib
	}
	return nil
}
