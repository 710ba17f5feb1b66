package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	// ErrNoAnswer: no whole answer arrived (connection refused or reset,
	// a timeout mid-answer). Implementations wrap a create's in
	// ErrMaybeCreated, since the request may have reached the server.
	ErrNoAnswer = errors.New("no answer from the marketplace")
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

// Class is what a failed call's error proves.
type Class struct {
	// Transient: repeating the same idempotent call may succeed.
	Transient bool
	// Refused: the marketplace certainly did not act on the call, so a
	// create that failed so rented nothing.
	Refused bool
}

// Classify is the one place that reads an error as transient or permanent
// and as refused or possibly applied; retries, waits and the rent's "was
// anything created?" all ask it. Cancellation is neither: the call may have
// been sent, and it is never repeated.
func Classify(err error) Class {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrMaybeCreated):
		return Class{}
	case errors.Is(err, ErrRateLimited):
		return Class{Transient: true, Refused: true}
	case errors.Is(err, ErrServer), errors.Is(err, ErrIncompleteListing), errors.Is(err, ErrNoAnswer):
		return Class{Transient: true}
	case errors.Is(err, ErrOfferGone), errors.Is(err, ErrInsufficientBalance), errors.Is(err, ErrAuth),
		errors.Is(err, ErrNotFound):
		return Class{Refused: true}
	}
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ClassifyStatus(ae.Status)
	}
	return Class{}
}

// ClassifyStatus reads an HTTP answer's status alone, for a client deciding
// whether to resend before it builds an error.
func ClassifyStatus(status int) Class {
	switch {
	case status == http.StatusTooManyRequests:
		return Class{Transient: true, Refused: true}
	case status == http.StatusInternalServerError, status == http.StatusBadGateway,
		status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return Class{Transient: true}
	case status >= 400 && status < 500:
		return Class{Refused: true}
	}
	return Class{}
}
