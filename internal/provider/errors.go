package provider

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Implementations wrap them (usually inside *APIError) so
// callers decide with errors.Is and never by matching text.
var (
	// ErrNotFound: the marketplace positively says the instance does not
	// exist. An auth failure is never reported as ErrNotFound.
	ErrNotFound = errors.New("not found")
	// ErrOfferGone: the offer was rented by someone else or withdrawn
	// (no_such_ask).
	ErrOfferGone = errors.New("offer no longer available")
	// ErrAuth: the key is missing, wrong or revoked.
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: HTTP 429 after the client's own retries.
	ErrRateLimited = errors.New("rate limited")
	// ErrInsufficientBalance: the account cannot pay for the rental.
	ErrInsufficientBalance = errors.New("insufficient balance")
	// ErrMaybeCreated: a create whose outcome is unknown (timeout, lost
	// response, 5xx). The instance may exist: look its label up.
	ErrMaybeCreated = errors.New("create outcome unknown")
	// ErrIncompleteListing: a listing that cannot be trusted to be whole.
	ErrIncompleteListing = errors.New("instance listing incomplete")
	// ErrServer: a 5xx after retries.
	ErrServer = errors.New("marketplace server error")
)

// APIError is an HTTP error answer, with what the server said.
type APIError struct {
	Method string
	Path   string // never includes a query string or key
	Status int
	Code   string // the body's "error" field, e.g. "no_such_ask"
	Msg    string // the body's "msg"/"message"/"detail", or the plain text
	Kind   error  // one of the sentinels above, or nil
}

func (e *APIError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = "(no message)"
	}
	if e.Code != "" {
		return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Method, e.Path, e.Status, e.Code, msg)
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, msg)
}

func (e *APIError) Unwrap() error { return e.Kind }

// Transient reports whether repeating the same idempotent call may succeed.
// It is the one place that classifies errors for retry; cancellation is never
// transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrServer) || errors.Is(err, ErrIncompleteListing)
}
