package model

import (
	"context"
	"testing"
)

// BenchmarkForwardDemo runs a decision-shaped batch (four rows of ~130
// tokens sharing a prefilled prefix, letter rows only) on the demo
// checkpoint.
func BenchmarkForwardDemo(b *testing.B) {
	m := loadTiny(b, demoDir)
	ids := make([]int32, 160)
	for i := range ids {
		ids[i] = int32((i*37%4000 + 1) % m.Config.Vocab)
	}
	prefix, err := m.Prefill(context.Background(), nil, ids[:30])
	if err != nil {
		b.Fatal(err)
	}
	defer prefix.Free()
	var rows []Row
	for r := range 4 {
		n := 100 + 10*r
		rows = append(rows, Row{Prefix: prefix, IDs: ids[30 : 30+n], Gather: []int{n - 1}})
	}
	head := m.HeadRows([]int{32, 33, 34})
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Forward(context.Background(), rows, head); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*(100+110+120+130))/b.Elapsed().Seconds(), "tok/s")
}
