package server

import (
	"context"
	"time"

	"github.com/vastfleet/vastfleet/internal/termsafe"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// NewToken makes a token for name with role in the server's database
// (spec, as serve --db), expiring after ttl (0: when revoked), and gives
// it: only its sha256 is kept. A role or name refused is the user's
// mistake.
func NewToken(ctx context.Context, spec string, dataDir func() (string, error), name, role string, ttl time.Duration) (string, error) {
	if !ValidRole(role) {
		return "", usage.Errorf("--role %q: use viewer or operator", role)
	}
	db, err := OpenSpec(ctx, spec, dataDir)
	if err != nil {
		return "", err
	}
	defer db.Close()
	tok, err := db.CreateToken(ctx, name, role, ttl)
	if err != nil {
		return "", usage.Error{Err: err}
	}
	return tok, nil
}

// RevokeToken revokes name's token in the server's database (spec): it
// is refused from now on. A name refused is the user's mistake.
func RevokeToken(ctx context.Context, spec string, dataDir func() (string, error), name string) error {
	db, err := OpenSpec(ctx, spec, dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.RevokeToken(ctx, name); err != nil {
		return usage.Error{Err: err}
	}
	return nil
}

// TokenHeader names the columns of TokenInfo.Cells.
var TokenHeader = []string{"NAME", "ROLE", "CREATED", "EXPIRES", "REVOKED"}

// Cells is the token as serve token ls shows it.
func (r TokenInfo) Cells() []string {
	return []string{r.Name, r.Role, r.CreatedAt, r.ExpiresAt, r.RevokedAt}
}

// AuditHeader names the columns of AuditEntry.Cells.
var AuditHeader = []string{"AT", "WHO", "ROLE", "ACTION", "TARGET", "OUTCOME"}

// Cells is the entry as serve audit shows it; the target and outcome
// carry what clients sent.
func (r AuditEntry) Cells() []string {
	return []string{r.At, r.Who, r.Role, r.Action, termsafe.Line(r.Target), termsafe.Line(r.Outcome)}
}
