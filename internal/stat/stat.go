// Package stat holds the few summary statistics vastfleet reports, so each
// has one definition.
package stat

import "slices"

// Median is the middle value of xs, or the mean of the two middle values
// when there is an even number of them; 0 when xs is empty. xs is left as
// it was (Median sorts a copy).
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
