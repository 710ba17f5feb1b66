// Package httpserver is the one place vastfleet's HTTP servers (the
// coordinator and its dashboard, the simulated marketplace) get their
// connection limits: a client that sends its headers or body a byte at a
// time, or opens connections and says nothing, is cut after a bound
// instead of holding a socket and a goroutine for ever.
package httpserver

import (
	"net/http"
	"time"
)

// Timeouts bound the phases of a connection; zero values take the
// defaults in brackets.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers [10s].
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included [30s]. A response
	// streamed for longer (server-sent events) is not cut by it: the
	// deadline is on reading the request only.
	Read time.Duration
	// Idle bounds a kept-alive connection between requests [120s].
	Idle time.Duration
	// Write bounds writing a response [none]: a download to a slow link
	// or an event stream may rightly take long; handlers that need a
	// bound set one with http.ResponseController.
	Write time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = 10 * time.Second
	}
	if t.Read <= 0 {
		t.Read = 30 * time.Second
	}
	if t.Idle <= 0 {
		t.Idle = 120 * time.Second
	}
	return t
}

// New is an http.Server for h with every read phase bounded.
func New(h http.Handler, t Timeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}
