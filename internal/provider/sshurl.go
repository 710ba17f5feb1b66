package provider

import (
	"fmt"
	"strconv"
	"strings"
)

// SSHAddr derives where to ssh into an instance exactly as `vastai ssh-url`
// does: a "22/tcp" port mapping means a direct route to public_ipaddr at the
// mapped host port; otherwise the proxy ssh_host:ssh_port, plus one when the
// runtype includes jupyter (the proxy's first port then serves Jupyter).
// ok is false when no usable host and port can be derived.
func SSHAddr(inst Instance) (host string, port int, ok bool) {
	if binds, direct := inst.Ports["22/tcp"]; direct {
		if len(binds) == 0 {
			return "", 0, false
		}
		p, err := strconv.Atoi(strings.TrimSpace(binds[0].HostPort))
		if err != nil {
			return "", 0, false
		}
		host, port = strings.TrimSpace(inst.PublicIPAddr), p
	} else {
		host, port = strings.TrimSpace(inst.SSHHost), inst.SSHPort
		if strings.Contains(inst.ImageRuntype, "jupyter") {
			port++
		}
	}
	if host == "" || port <= 0 || port > 65535 {
		return "", 0, false
	}
	return host, port, true
}

// SSHURL is "ssh://root@HOST:PORT", or "" when SSHAddr finds no route.
func SSHURL(inst Instance) string { return routeURL("ssh", inst) }

// SCPURL is what `vastai scp-url` prints: the same route as SSHURL, as
// "scp://root@HOST:PORT".
func SCPURL(inst Instance) string { return routeURL("scp", inst) }

func routeURL(scheme string, inst Instance) string {
	host, port, ok := SSHAddr(inst)
	if !ok {
		return ""
	}
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s://root@%s:%d", scheme, host, port)
}
