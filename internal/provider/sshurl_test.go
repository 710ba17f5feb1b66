package provider

import (
	"strings"
	"testing"
)

func TestSSHAddr(t *testing.T) {
	ports := func(hp string) map[string][]PortBinding {
		return map[string][]PortBinding{"22/tcp": {{HostIP: "0.0.0.0", HostPort: hp}}, "8080/tcp": {{HostPort: "40001"}}}
	}
	tests := []struct {
		name string
		in   Instance
		want string
	}{
		{"direct", Instance{PublicIPAddr: "203.0.113.7", SSHHost: "ssh4.vast.ai", SSHPort: 12345, Ports: ports("40022")}, "ssh://root@203.0.113.7:40022"},
		{"direct ignores jupyter", Instance{PublicIPAddr: "203.0.113.7", Ports: ports("40022"), ImageRuntype: "jupyter_direc ssh_direc ssh_proxy"}, "ssh://root@203.0.113.7:40022"},
		{"proxy", Instance{PublicIPAddr: "203.0.113.7", SSHHost: "ssh4.vast.ai", SSHPort: 12345, ImageRuntype: "ssh"}, "ssh://root@ssh4.vast.ai:12345"},
		{"proxy jupyter +1", Instance{SSHHost: "ssh4.vast.ai", SSHPort: 12345, ImageRuntype: "jupyter_proxy ssh_proxy"}, "ssh://root@ssh4.vast.ai:12346"},
		{"nil ports", Instance{SSHHost: "ssh4.vast.ai", SSHPort: 12345, Ports: nil}, "ssh://root@ssh4.vast.ai:12345"},
		{"ports without 22", Instance{SSHHost: "ssh4.vast.ai", SSHPort: 7, Ports: map[string][]PortBinding{"8080/tcp": {{HostPort: "1"}}}}, "ssh://root@ssh4.vast.ai:7"},
		{"empty 22 list", Instance{PublicIPAddr: "203.0.113.7", Ports: map[string][]PortBinding{"22/tcp": nil}}, ""},
		{"bad host port", Instance{PublicIPAddr: "203.0.113.7", Ports: ports("x")}, ""},
		{"no public ip", Instance{Ports: ports("40022")}, ""},
		{"nothing yet", Instance{}, ""},
		{"ipv6", Instance{PublicIPAddr: "2001:db8::1", Ports: ports("22")}, "ssh://root@[2001:db8::1]:22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SSHURL(tt.in); got != tt.want {
				t.Errorf("SSHURL = %q, want %q", got, tt.want)
			}
			if got, want := SCPURL(tt.in), strings.Replace(tt.want, "ssh://", "scp://", 1); got != want {
				t.Errorf("SCPURL = %q, want %q", got, want)
			}
			_, _, ok := SSHAddr(tt.in)
			if ok != (tt.want != "") {
				t.Errorf("ok = %v", ok)
			}
		})
	}
}

// The address a listing gives reaches the store as SSHURL derived it:
// an IPv6 host keeps its brackets.
func TestSSHURLBracketsIPv6(t *testing.T) {
	inst := Instance{PublicIPAddr: "2001:db8::7", Ports: map[string][]PortBinding{"22/tcp": {{HostIP: "0.0.0.0", HostPort: "40022"}}}}
	if got, want := SSHURL(inst), "ssh://root@[2001:db8::7]:40022"; got != want {
		t.Fatalf("SSHURL = %q, want %q", got, want)
	}
}
