package model

import (
	"fmt"
	"math"

	"github.com/startlux/startlux/tensor"
)

// gptqInt8 rounds w·diag(cols) to an int8 weight with error compensation
// (GPTQ): the channel scales are the absmax rule's (or QuantizeInt8Clip's),
// and the columns are rounded in order, each column's rounding error spread
// over the columns not yet rounded so as to minimise ‖X·(W − Ŵ)ᵀ‖² for the
// calibration inputs X, whose Gram matrix XᵀX is h (n×n, row-major, of the
// input as the weight reads it: divided by cols).
func gptqInt8(w *tensor.Weight, cols []float32, h []float64, clip bool) (*tensor.Weight, error) {
	o, n := w.Rows(), w.Cols()
	if len(h) != n*n {
		return nil, fmt.Errorf("int8: %s: gram matrix of %d values for %d in-features", w.Name, len(h), n)
	}
	W := make([]float64, o*n)
	row := make([]float32, n)
	scales := make([]float32, o)
	inv := make([]float32, o)
	qrow := make([]int8, n)
	for r := range o {
		w.Row(r, row)
		if cols != nil {
			for i, f := range cols {
				row[i] *= f
			}
		}
		var s float32
		var ok bool
		if clip {
			s, ok = tensor.QuantizeInt8Clip(qrow, row)
		} else {
			s, ok = tensor.QuantizeInt8Vec(qrow, row)
		}
		if !ok {
			return nil, fmt.Errorf("int8: %s: row %d holds a NaN or an infinity", w.Name, r)
		}
		scales[r] = s
		if s > 0 {
			inv[r] = 1 / s
		}
		for i, v := range row {
			W[r*n+i] = float64(v)
		}
	}
	H := make([]float64, n*n)
	copy(H, h)
	if cols != nil {
		for i := range n {
			for j := range n {
				H[i*n+j] /= float64(cols[i]) * float64(cols[j])
			}
		}
	}
	var mean float64
	for i := range n {
		mean += H[i*n+i]
	}
	damp := 0.01 * mean / float64(n)
	if !(damp > 0) {
		damp = 1
	}
	for i := range n {
		H[i*n+i] += damp
	}
	U, err := cholInvUpper(H, n)
	if err != nil {
		return nil, fmt.Errorf("int8: %s: %w", w.Name, err)
	}
	q := make([]int8, o*n)
	for i := range n {
		d := U[i*n+i]
		for r := range o {
			if scales[r] == 0 {
				continue
			}
			v := W[r*n+i]
			qi := tensor.RoundInt8(float32(v) * inv[r])
			q[r*n+i] = int8(qi)
			e := (v - float64(scales[r])*float64(qi)) / d
			wr := W[r*n : (r+1)*n]
			ur := U[i*n : (i+1)*n]
			for j := i + 1; j < n; j++ {
				wr[j] -= e * ur[j]
			}
		}
	}
	return tensor.Int8FromValues(w.Name, o, n, q, scales), nil
}

// cholInvUpper returns the upper Cholesky factor U of H⁻¹ (H⁻¹ = UᵀU) for a
// symmetric positive definite H (n×n, row-major).
func cholInvUpper(H []float64, n int) ([]float64, error) {
	L, err := cholesky(H, n)
	if err != nil {
		return nil, err
	}
	// Linv = L⁻¹ (lower triangular).
	Li := make([]float64, n*n)
	for c := range n {
		Li[c*n+c] = 1 / L[c*n+c]
		for r := c + 1; r < n; r++ {
			var s float64
			for k := c; k < r; k++ {
				s += L[r*n+k] * Li[k*n+c]
			}
			Li[r*n+c] = -s / L[r*n+r]
		}
	}
	// H⁻¹ = Liᵀ Li.
	Hi := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			var s float64
			for k := j; k < n; k++ {
				s += Li[k*n+i] * Li[k*n+j]
			}
			Hi[i*n+j], Hi[j*n+i] = s, s
		}
	}
	// Upper factor: H⁻¹ = UᵀU, U = chol(H⁻¹)ᵀ.
	L2, err := cholesky(Hi, n)
	if err != nil {
		return nil, err
	}
	U := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			U[j*n+i] = L2[i*n+j]
		}
	}
	return U, nil
}

// cholesky returns the lower factor L of H = LLᵀ.
func cholesky(H []float64, n int) ([]float64, error) {
	L := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			s := H[i*n+j]
			for k := range j {
				s -= L[i*n+k] * L[j*n+k]
			}
			if i == j {
				if !(s > 0) {
					return nil, fmt.Errorf("gram matrix not positive definite at %d", i)
				}
				L[i*n+i] = math.Sqrt(s)
			} else {
				L[i*n+j] = s / L[j*n+j]
			}
		}
	}
	return L, nil
}
