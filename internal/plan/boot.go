package plan

import (
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

// BootHours is the one estimate of how long an offer takes to boot an
// image: the pull over the host's download speed, then setup.
func BootHours(imageGB, inetDownMbps float64) float64 {
	return market.PullSeconds(imageGB, inetDownMbps)/3600 + SetupHours
}

// BootTime is BootHours as a duration.
func BootTime(imageGB, inetDownMbps float64) time.Duration {
	return time.Duration(BootHours(imageGB, inetDownMbps) * float64(time.Hour))
}

// ImageGB guesses an image's extracted size from its name, for when the
// user does not say (--image-size): registries are not asked, so common
// families get typical sizes and anything else DefaultImageGB.
func ImageGB(image string) float64 {
	l := strings.ToLower(image)
	switch {
	case strings.Contains(l, "torch"), strings.Contains(l, "cuda"), strings.Contains(l, "nvidia"):
		return DefaultImageGB
	case strings.Contains(l, "tensorflow"):
		return 7
	case strings.Contains(l, "alpine"), strings.Contains(l, "busybox"):
		return 0.1
	case strings.Contains(l, "ubuntu"), strings.Contains(l, "debian"):
		return 0.3
	}
	return DefaultImageGB
}
