package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// OpenSSH runs the system ssh with argv (SSHArgs, and a command) on n,
// on the terminal's streams. The host key is learnt and the fleet key
// attached in-process first, so OpenSSH meets a known host that accepts
// its key.
func (o *Ops) OpenSSH(ctx context.Context, n Node, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	rows, err := o.Exec(ctx, []Node{n}, ExecOptions{Command: "true", Parallel: 1, Quiet: true})
	if err != nil {
		return err
	}
	if rows[0].Error != "" {
		return fmt.Errorf("%s", rows[0].Error)
	}
	c := exec.CommandContext(ctx, "ssh", argv...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	if err := c.Run(); err != nil {
		if ee := new(exec.ExitError); errors.As(err, &ee) {
			return fmt.Errorf("ssh exited with status %d", ee.ExitCode())
		}
		return err
	}
	return nil
}
