package provider

import (
	"context"
	"time"
)

// KeyManager registers SSH public keys with the marketplace and attaches
// them to instances (vast: /api/v0/ssh/ and /api/v0/instances/{id}/ssh/).
//
// Whether a key registered on the account reaches instances created
// before it is not settled (vast's docs disagree): register before
// creating, then check InstanceSSHKeys and attach what is missing.
type KeyManager interface {
	// RegisterSSHKey adds a public key (an authorized_keys line) to the
	// account; registering a key that is already there returns it.
	RegisterSSHKey(ctx context.Context, publicKey string) (SSHKey, error)
	// ListSSHKeys returns the account's keys.
	ListSSHKeys(ctx context.Context) ([]SSHKey, error)
	// DeleteSSHKey removes a key from the account.
	DeleteSSHKey(ctx context.Context, keyID int64) error
	// AttachSSHKey lets a public key into one instance.
	AttachSSHKey(ctx context.Context, instanceID int64, publicKey string) error
	// InstanceSSHKeys returns the keys an instance accepts.
	InstanceSSHKeys(ctx context.Context, instanceID int64) ([]SSHKey, error)
	// DetachSSHKey removes a key from one instance.
	DetachSSHKey(ctx context.Context, instanceID, keyID int64) error
}

// SSHKey is a public key the marketplace holds.
type SSHKey struct {
	ID        int64     `json:"id"`
	PublicKey string    `json:"public_key"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}
