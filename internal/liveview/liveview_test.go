package liveview

import (
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
)

// The live status fits the terminal by leaving out its least important
// parts first: findings, rate and spend stay in sight on a narrow one.
func TestFitStatusKeepsTheLastParts(t *testing.T) {
	t.Parallel()
	parts := []string{"nodes 10 alive 0 stale 0 dead", "run exited 3/10", "items 40/100 ETA 5m", "findings 12  3.1kH/s  $0.615/hr  $1.20 spent", "4m10s"}
	all := strings.Join(parts, "  ")
	for _, tc := range []struct {
		width int
		want  string
	}{
		{200, all},
		{runewidth.StringWidth(all), all},
		{75, "items 40/100 ETA 5m  findings 12  3.1kH/s  $0.615/hr  $1.20 spent  4m10s"},
		{20, "4m10s"},
		{3, "4m…"},
		{0, ""},
	} {
		if got := fitStatus(parts, tc.width); got != tc.want {
			t.Errorf("fitStatus(width %d) = %q, want %q", tc.width, got, tc.want)
		}
		if got := fitStatus(parts, tc.width); runewidth.StringWidth(got) > max(tc.width, 0) {
			t.Errorf("fitStatus(width %d) is %d columns wide", tc.width, runewidth.StringWidth(got))
		}
	}
}
