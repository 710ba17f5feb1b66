package market

import (
	"container/heap"
	"slices"
)

// bestK returns the indices 0..n-1 that come first under cmp (ties by
// index, so the result equals a stable sort's prefix), best first. With
// k <= 0 or k >= n it sorts every index; otherwise it keeps a bounded heap
// of k, so ranking a 100,000-offer market for the top 100 never sorts the
// other 99,900.
func bestK(n, k int, cmp func(a, b int32) int) []int32 {
	stable := func(a, b int32) int {
		if c := cmp(a, b); c != 0 {
			return c
		}
		return int(a) - int(b)
	}
	if k <= 0 || k >= n {
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, stable)
		return idx
	}
	h := &worstFirst{cmp: stable, idx: make([]int32, 0, k)}
	for i := range int32(n) {
		if len(h.idx) < k {
			heap.Push(h, i)
			continue
		}
		if stable(i, h.idx[0]) < 0 {
			h.idx[0] = i
			heap.Fix(h, 0)
		}
	}
	slices.SortFunc(h.idx, stable)
	return h.idx
}

// worstFirst is a heap whose root is the worst index kept.
type worstFirst struct {
	cmp func(a, b int32) int
	idx []int32
}

func (h *worstFirst) Len() int           { return len(h.idx) }
func (h *worstFirst) Less(i, j int) bool { return h.cmp(h.idx[i], h.idx[j]) > 0 }
func (h *worstFirst) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *worstFirst) Push(x any)         { h.idx = append(h.idx, x.(int32)) }
func (h *worstFirst) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// BestK is bestK for callers outside the package: the indices 0..n-1
// first under cmp, ties by index (a stable sort's prefix), at most k of
// them (k <= 0: all), best first.
func BestK(n, k int, cmp func(a, b int32) int) []int32 { return bestK(n, k, cmp) }
