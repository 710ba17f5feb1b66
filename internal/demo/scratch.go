package demo

import (
	"bytes"
	"io"
	"slices"
)

// scratchFilter passes whole lines on, leaving out those that name a path
// in dir or a vastfleet command to run later: the demo removes dir.
type scratchFilter struct {
	w   io.Writer
	dir string
	buf []byte
}

// NewScratchFilter writes to w what stays true once dir is removed.
func NewScratchFilter(w io.Writer, dir string) io.Writer {
	return &scratchFilter{w: w, dir: dir}
}

func (s *scratchFilter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := trimHint(s.buf[:i+1])
		if !bytes.Contains(line, []byte(s.dir)) && !bytes.Contains(line, []byte("`vastfleet ")) {
			if _, err := s.w.Write(line); err != nil {
				return 0, err
			}
		}
		s.buf = s.buf[i+1:]
	}
}

// trimHint drops a trailing "; ... `vastfleet ...`" clause from a line
// that says something else first (the charged line's reconcile hint),
// so the figure stays when the command that would read the gone data
// dir goes. A line that is only a hint is left whole, for the caller to
// drop.
func trimHint(line []byte) []byte {
	i := bytes.Index(line, []byte("`vastfleet "))
	if i < 0 {
		return line
	}
	j := bytes.LastIndex(line[:i], []byte("; "))
	k := bytes.IndexByte(line[i+1:], '`')
	if j < 0 || k < 0 {
		return line
	}
	return append(slices.Clip(line[:j]), line[i+1+k+1:]...)
}
