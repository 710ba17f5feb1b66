// Package certpin is the coordinator's TLS certificate pin: the lowercase
// hex sha256 of the certificate's DER, which the coordinator announces and
// the agents and the CLI check. The coordinator's certificate is
// self-signed, so the pin replaces chain and name checks altogether.
package certpin

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Of is the pin of a certificate given as DER.
func Of(der []byte) string {
	h := sha256.Sum256(der)
	return hex.EncodeToString(h[:])
}

// Parse accepts a pin in hex of either case, with or without colons
// (openssl prints AA:BB:…), and returns it as Of writes it.
func Parse(s string) (string, error) {
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	if b, err := hex.DecodeString(s); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("want the certificate's sha256 as 64 hex digits, got %q", s)
	}
	return s, nil
}

// TLSConfig accepts exactly the certificate whose pin is pin (as Parse
// returns it), and nothing else: not a CA-signed one for the same name,
// not an expired or renamed one. VerifyConnection runs on every
// handshake, resumed ones included.
func TLSConfig(pin string) *tls.Config {
	want, _ := hex.DecodeString(pin)
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("coordinator presented no certificate")
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if len(want) != sha256.Size || subtle.ConstantTimeCompare(got[:], want) != 1 {
				return fmt.Errorf("coordinator certificate sha256 %x does not match the pinned %s", got, pin)
			}
			return nil
		},
	}
}
