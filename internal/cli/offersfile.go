package cli

import (
	"io"
	"os"
)

// readOffersFile returns an offers file's bytes: stdin for "-", else the
// file mapped read-only with its pages populated at once (a 100 MB dump
// read into fresh memory costs tens of thousands of page faults first).
// release unmaps it; the bytes must not be used after.
func readOffersFile(stdin io.Reader, path string) (data []byte, release func(), err error) {
	if path == "-" {
		data, err = io.ReadAll(stdin)
		return data, func() {}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Mode().IsRegular() && st.Size() > 0 {
		if data, err := mmapPopulate(f, int(st.Size())); err == nil {
			return data, func() { _ = munmap(data) }, nil
		}
	}
	data, err = io.ReadAll(f)
	return data, func() {}, err
}
