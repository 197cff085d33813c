package decide

// passOverheadTokens is what one more pass costs, counted in padded
// positions: every pass streams all the weights once (the CPU backend widens
// each bf16 tile again, a GPU pays its launches), so a pass is only worth
// splitting off when it saves more padding than this.
const passOverheadTokens = 64

// planPasses splits rows, whose lengths lens are sorted longest first, into
// consecutive passes of at most maxTokens padded positions (rows × longest
// row; a single row longer than that runs alone) and at most maxRows rows
// (each row of a pass holds its own recurrent state), choosing the split that
// minimises the padded positions computed plus passOverheadTokens per pass.
// Padding every short row to the longest one of a big batch wastes more than
// a second pass costs, and the greedy fill does exactly that. It returns the
// end index of each pass.
func planPasses(lens []int, maxTokens, maxRows int) []int {
	n := len(lens)
	if n == 0 {
		return nil
	}
	// best[j] is the least cost of the first j rows; from[j] where their
	// last pass starts.
	best := make([]int, n+1)
	from := make([]int, n+1)
	for j := 1; j <= n; j++ {
		best[j] = -1
		// The last pass is rows i..j-1; its width is lens[i], the longest.
		for i := j - 1; i >= 0; i-- {
			w := lens[i] * (j - i)
			if (w > maxTokens || j-i > maxRows) && i < j-1 {
				break // longer passes only grow
			}
			if c := best[i] + w + passOverheadTokens; best[j] < 0 || c < best[j] {
				best[j], from[j] = c, i
			}
		}
	}
	var ends []int
	for j := n; j > 0; j = from[j] {
		ends = append(ends, j)
	}
	for a, b := 0, len(ends)-1; a < b; a, b = a+1, b-1 {
		ends[a], ends[b] = ends[b], ends[a]
	}
	return ends
}
