package market

import (
	"math"
	"slices"
	"sync"
)

// primaryKey orders rows by what compare looks at first: offers that
// rank (not bad) before the others, then score descending, as one
// unsigned number (smaller first). Rows with equal primary keys are the
// ones compare still has to tell apart, by dph_total and id.
func (a *rankKey) primaryKey() uint64 {
	if a.bad {
		return math.MaxUint64
	}
	s := a.score
	if s == 0 {
		s = 0 // -0 and +0 compare equal: give them one key
	}
	b := math.Float64bits(s)
	// The IEEE bits as an ascending unsigned order, then inverted for
	// descending. A finite score never maps to MaxUint64.
	if b>>63 == 1 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	return ^b
}

// radixMin is the run length from which sortRows radix sorts; shorter
// runs are sorted by comparison.
const radixMin = 256

// rankScratch is the working memory of one ranking, kept between
// rankings (rankScratchPool): a ranking of a large market then writes
// into memory it has touched before instead of fresh pages, whose first
// touch costs more than the sort itself.
type rankScratch struct {
	parts  [][]rankRow
	all    []rankRow
	sorted []rankRow
	a, b   []radixItem
}

var rankScratchPool = sync.Pool{New: func() any { return new(rankScratch) }}

type radixItem struct {
	key uint64
	row int32
}

// sortRows sorts rows as slices.SortFunc(rows, compareRows) does (that
// order is total: ties end at the index), with an LSD radix sort on the
// primary key, which is stable, and a comparison sort of each run of
// equal keys.
func sortRows(rows []rankRow) { sortRowsIn(rows, new(rankScratch)) }

// sortRowsIn is sortRows with its buffers taken from sc.
func sortRowsIn(rows []rankRow, sc *rankScratch) {
	if len(rows) < radixMin {
		slices.SortFunc(rows, compareRows)
		return
	}
	a := grow(sc.a, len(rows))
	b := grow(sc.b, len(rows))
	sc.a, sc.b = a, b
	for i := range rows {
		a[i] = radixItem{rows[i].primaryKey(), int32(i)}
	}
	var count [256]int
	for shift := uint(0); shift < 64; shift += 8 {
		clear(count[:])
		for i := range a {
			count[byte(a[i].key>>shift)]++
		}
		if count[byte(a[0].key>>shift)] == len(a) {
			continue // every key has this byte: the pass would change nothing
		}
		pos := 0
		for d := range count {
			c := count[d]
			count[d] = pos
			pos += c
		}
		for i := range a {
			d := byte(a[i].key >> shift)
			b[count[d]] = a[i]
			count[d]++
		}
		a, b = b, a
	}
	sorted := grow(sc.sorted, len(rows))
	sc.sorted = sorted
	for i := range a {
		sorted[i] = rows[a[i].row]
	}
	// Equal primary keys: order those runs by the rest of the comparison.
	for lo := 0; lo < len(a); {
		hi := lo + 1
		for hi < len(a) && a[hi].key == a[lo].key {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(sorted[lo:hi], compareRows)
		}
		lo = hi
	}
	copy(rows, sorted)
}

// grow returns s resized to n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}
