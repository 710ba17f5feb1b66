package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// registerFleetKey puts the fleet's public key on the marketplace account
// before instances are created, so they boot accepting it and the first
// exec needs no per-instance attach (which stays as the fallback for
// instances created before, or elsewhere). The account's keys are listed
// first: the key is added only when no key with the same type and body is
// there, whatever its comment. A failure is a warning, not an error: the
// rental itself does not need the key.
func (f *factory) registerFleetKey(ctx context.Context, p provider.Provider) {
	km, ok := p.(provider.KeyManager)
	if !ok {
		return
	}
	key, err := f.fleetKey()
	if err != nil {
		f.warnOnce(fmt.Sprintf("fleet SSH key: %v (instances will get it attached when first reached)", err))
		return
	}
	keys, err := km.ListSSHKeys(ctx)
	if err == nil {
		for _, k := range keys {
			if sameSSHKey(k.PublicKey, key.Authorized) {
				return
			}
		}
		_, err = km.RegisterSSHKey(ctx, key.Authorized)
	}
	if err != nil && ctx.Err() == nil {
		f.warnOnce(fmt.Sprintf("registering the fleet SSH key on the account: %v (instances will get it attached when first reached)", err))
	}
}

// sameSSHKey compares two authorized_keys lines by key type and body,
// ignoring comments and options' spacing.
func sameSSHKey(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	return len(fa) >= 2 && len(fb) >= 2 && fa[0] == fb[0] && fa[1] == fb[1]
}
