package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// frame is one line of a command's output as the server sends it.
type frame struct {
	Out  string `json:"out,omitempty"`
	Err  string `json:"err,omitempty"`
	Exit *int   `json:"exit,omitempty"`
}

func (f frame) line() []byte {
	b, _ := json.Marshal(f)
	return append(b, '\n')
}

// frameWriter is an io.Writer whose writes become frames of one stream.
type frameWriter struct {
	stream string
	emit   func(frame)
}

func (w frameWriter) Write(p []byte) (int, error) {
	f := frame{Out: string(p)}
	if w.stream == "err" {
		f = frame{Err: string(p)}
	}
	w.emit(f)
	return len(p), nil
}

// frameLog is a job's output, kept as frames in a file: followers read
// it from any offset, also after the server restarted. Server replicas
// sharing a data dir share the file: one appends (the replica running
// the job), the others read what it appended.
type frameLog struct {
	mu      sync.Mutex
	f       *os.File
	size    int64
	ended   bool
	changed chan struct{}
}

func openFrameLog(path string) (*frameLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	l := &frameLog{f: f, changed: make(chan struct{})}
	if err := l.load(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// load reads the whole file again (l.mu held or not yet shared). A line
// cut short by a crash is dropped: followers see whole frames.
func (l *frameLog) load() error {
	b, err := io.ReadAll(io.NewSectionReader(l.f, 0, 1<<62))
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		if err := l.f.Truncate(int64(i + 1)); err != nil {
			return err
		}
		b = b[:i+1]
	}
	l.size, l.ended = int64(len(b)), hasExit(b)
	return nil
}

// Reload takes in what another replica wrote, before this one appends
// (it took the job over).
func (l *frameLog) Reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.load()
}

// catchUp takes in whole frames another replica appended (l.mu held).
func (l *frameLog) catchUp() {
	fi, err := l.f.Stat()
	if err != nil || fi.Size() <= l.size {
		return
	}
	tail := make([]byte, fi.Size()-l.size)
	if _, err := l.f.ReadAt(tail, l.size); err != nil {
		return
	}
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
		l.size += int64(i + 1)
		l.ended = hasExit(tail[:i+1])
	}
}

// hasExit says whether the log's last frame is an exit frame.
func hasExit(b []byte) bool {
	b = bytes.TrimRight(b, "\n")
	last := b[bytes.LastIndexByte(b, '\n')+1:]
	var f frame
	return json.Unmarshal(last, &f) == nil && f.Exit != nil
}

// Frame appends a frame and wakes the followers.
func (l *frameLog) Frame(f frame) {
	line := f.line()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	if _, err := l.f.Write(line); err == nil {
		l.size += int64(len(line))
	}
	if f.Exit != nil {
		l.ended = true
	} else {
		l.ended = false // a job resumed after an exit frame goes on
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// Writer is one stream ("out" or "err") into the log.
func (l *frameLog) Writer(stream string) io.Writer { return frameWriter{stream, l.Frame} }

// Size is the log's length now.
func (l *frameLog) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.size
}

// Changed is closed when the log next changes.
func (l *frameLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// ReadFrom is the log from offset on, and whether it has ended (its exit
// frame is among what was read, or was before it).
func (l *frameLog) ReadFrom(offset int64) ([]byte, bool, error) {
	l.mu.Lock()
	l.catchUp()
	size, ended := l.size, l.ended
	l.mu.Unlock()
	if offset >= size {
		return nil, ended, nil
	}
	b := make([]byte, size-offset)
	if _, err := l.f.ReadAt(b, offset); err != nil {
		return nil, false, err
	}
	return b, ended, nil
}

// Close closes the file.
func (l *frameLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// streamWriter sends frames straight to an HTTP response.
type streamWriter struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	flush func()
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	s := &streamWriter{w: w, flush: func() {}}
	if f, ok := w.(http.Flusher); ok {
		s.flush = f.Flush
	}
	return s
}

func (s *streamWriter) Frame(f frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(f.line())
	s.flush()
}

func (s *streamWriter) Writer(stream string) io.Writer { return frameWriter{stream, s.Frame} }
