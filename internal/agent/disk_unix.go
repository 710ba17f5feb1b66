//go:build unix

package agent

import "syscall"

// diskUsage is the used and total bytes of the filesystem holding path;
// zeros when it cannot be read.
func diskUsage(path string) (used, total int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Blocks) * bs
}
