package certpin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseNormalises(t *testing.T) {
	t.Parallel()
	pin := strings.Repeat("ab", 32)
	for _, in := range []string{pin, strings.ToUpper(pin), " " + strings.Repeat("AB:", 31) + "AB\n"} {
		if got, err := Parse(in); err != nil || got != pin {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, pin)
		}
	}
	for _, bad := range []string{"", "ab", strings.Repeat("zz", 32), pin + "ab"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// A real TLS server: its own certificate's pin is accepted, any other
// refused, even where the chain and name checks would pass.
func TestTLSConfigAcceptsOnlyThePinned(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	get := func(pin string) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: TLSConfig(pin)}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	good := Of(srv.Certificate().Raw)
	if err := get(good); err != nil {
		t.Fatalf("the server's own pin was refused: %v", err)
	}
	other := strings.Repeat("0", 64)
	if err := get(other); err == nil || !strings.Contains(err.Error(), "does not match the pinned "+other) {
		t.Fatalf("another pin: err = %v, want a mismatch naming both", err)
	}
	if err := get(""); err == nil {
		t.Fatal("an empty pin accepted a certificate")
	}
}
