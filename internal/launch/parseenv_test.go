package launch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// --env reads the official CLI's Docker-flag form (`-e K=V -p 8000:8000`,
// where a port opens through a "-p 8000:8000" key) and vastfleet's own
// 'K=V;K2=V2' form, where TCP_PORTS and UDP_PORTS open their ports the
// same way: an env without the -p keys opens no port on vast.
func TestParseEnvOpensPortsAsTheCLIDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"-p 8000:8000", map[string]string{"-p 8000:8000": "1"}},
		{`-e HF_TOKEN=a=b -p 8000:8000 -p 9000:9000/udp -e MSG="hi there" -v /data:/data -n net1 -h box`,
			map[string]string{"HF_TOKEN": "a=b", "-p 8000:8000": "1", "-p 9000:9000/udp": "1", "MSG": "hi there",
				"-v /data:/data": "1", "-n net1": "1", "-h": "box"}},
		// The CLI drops what it cannot read: a bad port, a stray token.
		{"-p 80x0:8000 stray -e A=1", map[string]string{"A": "1"}},
		{"TCP_PORTS=8000", map[string]string{"TCP_PORTS": "8000", "-p 8000:8000": "1"}},
		{"TCP_PORTS=8000,8888;UDP_PORTS=9000;A=1", map[string]string{"TCP_PORTS": "8000,8888", "UDP_PORTS": "9000", "A": "1",
			"-p 8000:8000": "1", "-p 8888:8888": "1", "-p 9000:9000/udp": "1"}},
		{"UDP_PORTS=", map[string]string{"UDP_PORTS": ""}},
		{"A=1; -p 7000:7000", map[string]string{"A": "1", "-p 7000:7000": "1"}},
	} {
		got, err := ParseEnv(tc.in)
		if err != nil {
			t.Errorf("ParseEnv(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseEnv(%q) (-want +got):\n%s", tc.in, d)
		}
	}
	for _, bad := range []string{"TCP_PORTS=http", "TCP_PORTS=70000"} {
		if _, err := ParseEnv(bad); err == nil {
			t.Errorf("ParseEnv(%q) accepted", bad)
		}
	}
}
