package search

import (
	"os"
	"syscall"
)

func mmapPopulate(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
}

func munmap(b []byte) error { return syscall.Munmap(b) }
