package tensor

import "testing"

func TestAttnArgsRowLen(t *testing.T) {
	tests := []struct {
		name string
		len  []int
		row  int
		want int
	}{
		{"no lengths: all T", nil, 1, 10},
		{"shorter row", []int{10, 4}, 1, 4},
		{"longer than T", []int{12}, 0, 10},
		{"empty row", []int{0, 3}, 0, 0},
		{"negative", []int{-2}, 0, 0},
	}
	for _, tc := range tests {
		a := AttnArgs{B: max(1, len(tc.len)), T: 10, Len: tc.len}
		if got := a.RowLen(tc.row); got != tc.want {
			t.Errorf("%s: RowLen(%d) = %d, want %d", tc.name, tc.row, got, tc.want)
		}
	}
}
