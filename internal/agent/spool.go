package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// spool keeps every finding (and, in a second file, every item result) on
// disk from the moment a session reports it until the coordinator
// acknowledges it: one JSON line per record in STATE_DIR/spool.jsonl (and
// results.jsonl), fsynced before the record is sent. Acknowledged
// findings leave by an atomic rewrite (temp file, fsync, rename, fsync of
// the directory), so a crash at any point leaves either the old or the new
// file, never a mix.
type spool[T any] struct {
	mu      sync.Mutex
	path    string
	f       *os.File // append handle
	pending []T
	keyOf   func(T) string // the record's idempotency key
	sizeOf  func(T) int    // about how many bytes of JSON it sends as
}

// openSpool is the findings spool.
func openSpool(path string) (*spool[wire.Finding], error) {
	return openSpoolOf(path,
		func(f wire.Finding) string { return f.Key },
		func(f wire.Finding) int { return len(f.Data) + len(f.Key) + len(f.Session) + 64 })
}

// openSpool loads what an earlier run left unacknowledged. A torn last
// line (a crash mid-append, before its fsync returned) is dropped: that
// finding was never acknowledged to anyone, nor sent.
func openSpoolOf[T any](path string, keyOf func(T) string, sizeOf func(T) int) (*spool[T], error) {
	s := &spool[T]{path: path, keyOf: keyOf, sizeOf: sizeOf}
	torn := false
	if b, err := os.ReadFile(path); err == nil {
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var f T
			if err := json.Unmarshal(line, &f); err != nil || keyOf(f) == "" {
				torn = true
				continue
			}
			s.pending = append(s.pending, f)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			torn = true
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading the spool: %w", err)
	}
	if torn {
		// Appending after a torn line would glue the next finding onto it.
		if err := s.rewriteLocked(); err != nil {
			return nil, err
		}
	}
	if s.f == nil {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening the spool: %w", err)
		}
		s.f = f
	}
	return s, nil
}

// add appends a record and returns once it is on disk.
func (s *spool[T]) add(f T) error {
	line, err := json.Marshal(f)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, f)
	if s.f == nil {
		return os.ErrClosed
	}
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("appending to the spool: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("syncing the spool: %w", err)
	}
	return nil
}

// batch is the oldest pending findings, at most max of them and at most
// about maxBytes of JSON, but always at least one.
func (s *spool[T]) batch(max, maxBytes int) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	size := 0
	for _, f := range s.pending {
		n := s.sizeOf(f)
		if len(out) > 0 && (len(out) >= max || size+n > maxBytes) {
			break
		}
		out = append(out, f)
		size += n
	}
	return out
}

func (s *spool[T]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// ack drops the acknowledged keys and rewrites the file without them.
func (s *spool[T]) ack(keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	done := make(map[string]bool, len(keys))
	for _, k := range keys {
		done[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.pending[:0:0]
	for _, f := range s.pending {
		if !done[s.keyOf(f)] {
			kept = append(kept, f)
		}
	}
	dropped := len(s.pending) - len(kept)
	if dropped == 0 {
		return 0, nil
	}
	s.pending = kept
	return dropped, s.rewriteLocked()
}

func (s *spool[T]) rewriteLocked() error {
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, ".spool-*.tmp")
	if err != nil {
		return fmt.Errorf("rewriting the spool: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	w := bufio.NewWriter(tmp)
	enc := json.NewEncoder(w)
	for _, f := range s.pending {
		if err := enc.Encode(f); err != nil {
			tmp.Close()
			return err
		}
	}
	err = w.Flush()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("rewriting the spool: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself durable; some filesystems refuse, harmlessly
		d.Close()
	}
	// The old append handle points at the replaced file.
	if s.f != nil {
		s.f.Close()
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.f = nil
		return fmt.Errorf("reopening the spool: %w", err)
	}
	s.f = f
	return nil
}

func (s *spool[T]) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
