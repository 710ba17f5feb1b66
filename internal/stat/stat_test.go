package stat

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"nil", nil, 0},
		{"empty", []float64{}, 0},
		{"one", []float64{7}, 7},
		{"two: the mean of both", []float64{4, 1}, 2.5},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		{"even, unsorted", []float64{10, 2, 8, 4}, 6},
		{"ties in the middle", []float64{3, 1, 3, 9}, 3},
		{"all equal", []float64{2, 2, 2, 2}, 2},
		{"negative and zero", []float64{-4, 0, -1}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.xs)
			if got := Median(tc.xs); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", before, got, tc.want)
			}
			if !slices.Equal(tc.xs, before) {
				t.Errorf("Median changed its argument: %v, was %v", tc.xs, before)
			}
		})
	}
}
