package plan

import (
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

// ContainerStartSeconds is how long a host takes from a pulled, unpacked
// image to a running container (create, mount, start sshd).
const ContainerStartSeconds = 40

// LoadTime is the one estimate of how long offer o takes from a create to
// running an image of imageGB: the pull over the host's download speed,
// the extraction bounded by its disk, then the container start.
func LoadTime(imageGB float64, o *market.Offer) time.Duration {
	s := market.PullSeconds(imageGB, o.InetDown) + market.ExtractSeconds(imageGB, o.DiskBW) + ContainerStartSeconds
	return time.Duration(s * float64(time.Second))
}

// BootHours is how long offer o takes until a task can start on it: it
// loads the image (LoadTime), then the task's own setup (SetupHours).
func BootHours(imageGB float64, o *market.Offer) float64 {
	return LoadTime(imageGB, o).Hours() + SetupHours
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
