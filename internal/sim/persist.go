package sim

import (
	"errors"
	"fmt"
	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/filelock"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	stateFile = "sim-state.json"
	lockFile  = "sim.lock"
)

// ErrInUse: another process has the market's state open.
var ErrInUse = errors.New("sim: market in use")

// Open opens the market persisted in dir (creating it when absent), holding
// an exclusive lock on dir/sim.lock until Close so that two processes never
// write one market. A saved market keeps its seed and offer count; its clock
// continues from the saved sim time: a manual or virtual clock is set to it, a
// scaled clock runs on from it as if the market had been running meanwhile.
func Open(dir string, cfg Config) (*Market, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := acquire(dir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Market, error) {
		filelock.Release(lock)
		return nil, err
	}
	saved, err := loadState(dir)
	if err != nil {
		return fail(err)
	}
	if cfg.Clock == nil {
		cfg.Clock = defaultClock(cfg)
	}
	if saved == nil {
		// A journal without its snapshot is a reset market's: it goes
		// before the new market's first snapshot can be taken for its own
		// (that snapshot's directory fsync makes the removal durable).
		if err := removeJournal(dir); err != nil {
			return fail(err)
		}
		startAfterReset(dir, cfg.Clock)
	}
	if saved != nil {
		cfg.Seed, cfg.Offers = saved.Seed, saved.Offers
		switch c := cfg.Clock.(type) {
		case *clock.Scaled:
			c.Rebase(saved.SimTime, saved.WallTime)
		case *clock.Manual:
			if c.Now().Before(saved.SimTime) {
				c.Set(saved.SimTime)
			}
		case *clock.Shared:
			// The local market lived on at its pace while it was closed.
			c.Rebase(saved.SimTime, saved.WallTime)
		case *clock.Virtual:
			// A command that waits on the market resumes it where it was:
			// only its own waits move it on.
			c.Set(saved.SimTime)
		}
	}
	m, err := newMarket(cfg, saved)
	if err != nil {
		return fail(err)
	}
	m.dir, m.lock = dir, lock
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.saveLocked(); err != nil {
		m.lock = nil
		return fail(err)
	}
	return m, nil
}

func acquire(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := filelock.Acquire(path)
	if errors.Is(err, filelock.ErrBusy) {
		holder, _ := os.ReadFile(path)
		return nil, fmt.Errorf("%w: market in %s is open in another process (pid %s)", ErrInUse, dir, strings.TrimSpace(string(holder)))
	}
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// Save writes the state crash-safely: what changed since the last save as
// one line appended to the journal and synced, or now and then a whole new
// snapshot (temp file, fsync, rename, fsync dir); see journal.go. It is a
// no-op for a market not opened with a directory.
func (m *Market) Save() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saveLocked()
}

func (m *Market) saveLocked() error {
	if m.dir == "" {
		return nil
	}
	if sc, ok := m.cfg.Clock.(*clock.Scaled); ok {
		m.st.WallTime, m.st.SimTime = sc.Wall()
	} else {
		// A scaled clock that opens this state later runs on from here.
		m.st.WallTime, m.st.SimTime = clock.Wall{}.Now(), m.cfg.Clock.Now()
	}
	if m.st.SimTime.Before(m.st.BilledTo) {
		m.st.SimTime = m.st.BilledTo
	}
	return m.persistLocked()
}

// Close saves the state as a snapshot and releases the directory lock.
func (m *Market) Close() error {
	m.closeLiars()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts != nil {
		// The machines stop with the simulator; their files stay, and a
		// reopened market boots its running instances again (a restart:
		// onstart runs again).
		m.hosts.Close()
		clear(m.booted)
	}
	if m.lock == nil {
		return nil
	}
	m.jr.compact = true
	err := m.saveLocked()
	m.jr.close()
	if cerr := filelock.Release(m.lock); err == nil {
		err = cerr
	}
	m.lock = nil
	m.dir = ""
	return err
}

// Reset deletes the market persisted in dir. It fails while the market is
// open.
func Reset(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lock, err := acquire(dir)
	if err != nil {
		return err
	}
	defer func() {
		filelock.Release(lock)
	}()
	// The new market starts an hour after the old one's last moment, so
	// that none of the old market's instances can look too recent to be
	// listed yet: its listing is the whole truth from the start.
	if old, err := loadState(dir); err == nil && old != nil && !old.SimTime.IsZero() {
		after, _ := old.SimTime.Add(time.Hour).MarshalText()
		if err := atomicfile.WriteFile(filepath.Join(dir, resetFile), after, 0o600); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// After the snapshot: a journal left without one is never read.
	if err := removeJournal(dir); err != nil {
		return err
	}
	// The instance machines kept beside the state (HostsDir) go with it.
	return os.RemoveAll(HostsDir(dir))
}

// resetFile holds the earliest start of a market created after a reset.
const resetFile = "reset-after"

// startAfterReset moves a new market's clock past the reset market's end.
func startAfterReset(dir string, c clock.Clock) {
	b, err := os.ReadFile(filepath.Join(dir, resetFile))
	if err != nil {
		return
	}
	var after time.Time
	if after.UnmarshalText(b) != nil || !c.Now().Before(after) {
		return
	}
	switch c := c.(type) {
	case *clock.Scaled:
		c.RebaseNow(after)
	case interface{ Set(time.Time) }:
		c.Set(after)
	}
}

// HostsDir is where a market persisted in dir keeps its instances'
// machines (Config.HostDir), so that a reset removes them too.
func HostsDir(dir string) string { return filepath.Join(dir, "hosts") }
