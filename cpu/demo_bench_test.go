package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// BenchmarkDemoMatMul multiplies the demo decision model's shapes (H=128,
// I=384, bf16) for a one-request pass (121 rows) and for a batch pass of 64
// such requests (8320 rows):
//
//	go test ./cpu -run X -bench DemoMatMul -cpu 2
func BenchmarkDemoMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, be := range benchBackends(b) {
		for _, rows := range []int{121, 8320} {
			for _, s := range [][2]int{{384, 128}, {128, 384}, {256, 128}} {
				b.Run(fmt.Sprintf("%s/%dx%dx%d", be.name, rows, s[1], s[0]), func(b *testing.B) {
					w := tensor.FromFloat32("w", tensor.BF16, []int{s[0], s[1]}, randVec(rng, s[0]*s[1], 0.05))
					x := upload(be.b, randVec(rng, rows*s[1], 1))
					out := be.b.Alloc(rows * s[0])
					for b.Loop() {
						be.b.MatMul(out, x, w, rows)
					}
					b.ReportMetric(2*float64(rows*s[0]*s[1])*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
