package sim

import "math"

// The boot model: what happens between create and "running" on a host,
// from market-facts.md's account of image pulls (a multi-GB image took
// over ten minutes to pull and extract on a cloud host, and extraction,
// not download, was the bottleneck). Four phases:
//   - pull: the compressed image comes down the host's link (inet_down);
//   - extract: the layers unpack to about 2.2 times their size, written
//     as a great many small files, which a disk does at a fraction of its
//     sequential speed; one core decompresses, so nothing goes faster
//     than that core;
//   - start: the container starts and its ssh daemon comes up (a draw
//     of 10–60 s, in market.go);
//   - a slow host (throttled link, busy disk) is slow with the image only,
//     by a drawn factor (market.go).
const (
	// unpackedMBPerGB is what one GB of compressed layers unpacks to: about
	// 2.2 times its size.
	unpackedMBPerGB = 2200.0
	// smallFileShare is the share of a disk's sequential MB/s it keeps
	// writing a layer's many small files.
	smallFileShare = 1.0 / 6
	// coreInflateMBps is what one core decompresses, MB/s of output.
	coreInflateMBps = 100.0
	// slowestDiskMBps floors a disk's reported speed; diskUnreportedMBps
	// stands in for a host that reports none (disk_bw 0).
	slowestDiskMBps    = 6.0
	diskUnreportedMBps = 600.0
)

// pullSeconds is how long gb GB of compressed image takes down a link of
// inetDownMbps (a link reported as under 1 Mb/s is taken as 1).
func pullSeconds(gb, inetDownMbps float64) float64 {
	bits := gb * 8000 // Mb
	return bits / math.Max(inetDownMbps, 1)
}

// extractSeconds is how long a host with a disk of diskMBps sequential
// write takes to unpack gb GB of pulled image.
func extractSeconds(gb, diskMBps float64) float64 {
	if diskMBps <= 0 {
		diskMBps = diskUnreportedMBps
	}
	written := math.Max(gb, 0) * unpackedMBPerGB // MB of files
	rate := math.Max(diskMBps, slowestDiskMBps) * smallFileShare
	if rate > coreInflateMBps {
		rate = coreInflateMBps
	}
	return written / rate
}
