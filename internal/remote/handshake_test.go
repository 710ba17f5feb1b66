package remote

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// A port that accepts TCP and never speaks SSH is not a usable node; a
// real SSH server (which refuses the absent key) is.
func TestHandshake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startServer(t, listen(t), newSigner(t).PublicKey())
	if err := Handshake(ctx, "127.0.0.1", srv.addr.Port, 5*time.Second); err != nil {
		t.Fatalf("an SSH server: %v", err)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() // accepted by the kernel, never answered
	err = Handshake(ctx, "127.0.0.1", silent.Addr().(*net.TCPAddr).Port, 200*time.Millisecond)
	if !errors.Is(err, ErrHandshakeHang) {
		t.Errorf("a silent port: %v, want ErrHandshakeHang", err)
	}

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	p := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	if err := Handshake(ctx, "127.0.0.1", p, time.Second); !errors.Is(err, ErrRefused) {
		t.Errorf("a closed port: %v, want ErrRefused", err)
	}
}
