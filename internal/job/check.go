package job

import (
	"fmt"
	"os"

	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Check finds, before anything is rented, what in a task file would fail
// only once nodes bill: a workdir that is missing, not a directory, or
// that scan (the sync's reading of the tree, every file hashed) cannot
// read.
func Check(j *jobfile.Job, scan func(dir string) error) error {
	if j.Workdir == "" {
		return nil
	}
	fi, err := os.Stat(j.Workdir)
	switch {
	case err != nil:
		return fmt.Errorf("workdir %s: %w (fix the path in the task file; nothing was rented)", j.Workdir, err)
	case !fi.IsDir():
		return fmt.Errorf("workdir %s is not a directory (name the directory to sync; nothing was rented)", j.Workdir)
	}
	if scan == nil {
		return nil
	}
	if err := scan(j.Workdir); err != nil {
		return fmt.Errorf("workdir %s: %w (make it readable or ignore it in .vastfleetignore; nothing was rented)", j.Workdir, err)
	}
	return nil
}

// CheckUp is what up checks before it starts anything: the Ctrl+C choice
// given ahead (CheckChoice), where the coordinator listens (CheckCoordAddr:
// loopback says whether it is), and the task file (Check, the user's
// input).
func CheckUp(j *jobfile.Job, choice, coordAddr string, vast bool, scan func(dir string) error) (loopback bool, err error) {
	if err := CheckChoice(choice); err != nil {
		return false, err
	}
	if loopback, err = CheckCoordAddr(coordAddr, vast); err != nil {
		return false, err
	}
	if err := Check(j, scan); err != nil {
		return false, usage.Error{Err: err}
	}
	return loopback, nil
}
