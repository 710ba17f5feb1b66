package search

import (
	"io"
	"os"
)

// ReadOffersFile returns an offers file's bytes: stdin for "-", else the
// file mapped read-only with its pages populated at once (a 100 MB dump
// read into fresh memory costs tens of thousands of page faults first).
// release unmaps it; the bytes must not be used after.
//
// Stdin is mapped the same way: redirected from a file, that file; a pipe
// is spooled to an unlinked temporary file first (the kernel splices it,
// no copy through this process), since reading it into a growing buffer
// took 3-4 times as long and 1.8 times the memory of --from FILE.
func ReadOffersFile(stdin io.Reader, path string) (data []byte, release func(), err error) {
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		return mapOrRead(f)
	}
	in, ok := stdin.(*os.File)
	if !ok {
		data, err = io.ReadAll(stdin)
		return data, func() {}, err
	}
	if st, err := in.Stat(); err == nil && st.Mode().IsRegular() {
		return mapOrRead(in)
	}
	spool, err := os.CreateTemp("", "vastfleet-offers-*.json")
	if err != nil {
		data, err = io.ReadAll(in)
		return data, func() {}, err
	}
	// Unlinked at once: the data lives as long as the mapping, and an
	// interrupted run leaves nothing behind.
	os.Remove(spool.Name())
	defer spool.Close()
	if _, err := io.Copy(spool, in); err != nil {
		return nil, nil, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	return mapOrRead(spool)
}

// mapOrRead maps f read-only with its pages populated, or reads it where
// it cannot be mapped (an empty file, a system without mmap).
func mapOrRead(f *os.File) ([]byte, func(), error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Mode().IsRegular() && st.Size() > 0 {
		if data, err := mmapPopulate(f, int(st.Size())); err == nil {
			return data, func() { _ = munmap(data) }, nil
		}
	}
	data, err := io.ReadAll(f)
	return data, func() {}, err
}
