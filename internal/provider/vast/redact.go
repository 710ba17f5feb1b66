package vast

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL is the one way a URL that may carry credentials is shown: the
// userinfo (user and password) and the values of query parameters that look
// secret (api_key, token, ...) become "REDACTED". A string that does not
// parse as a URL is not shown at all: its parts cannot be told apart.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretParam(k) {
				for i := range q[k] {
					q[k][i] = "REDACTED"
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// secretParam reports whether a query parameter's name says it holds a
// credential.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"key", "token", "secret", "pass", "auth", "sig", "cred", "session"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactError returns err with the URL of any *url.Error in it redacted;
// the rest of the chain (errors.Is/As) is kept.
func RedactError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if red := RedactURL(ue.URL); red != ue.URL {
		return &redactedError{err: err, old: ue.URL, new: red}
	}
	return err
}

// redactedError is an error whose text has one URL replaced.
type redactedError struct {
	err      error
	old, new string
}

func (e *redactedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.old, e.new) }
func (e *redactedError) Unwrap() error { return e.err }
