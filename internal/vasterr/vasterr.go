// Package vasterr reads what a vast.ai error answer says: its code and
// message, whether it means a bad key, and whether it proves an instance
// gone. It is the one home of those rules, shared by the vast client and
// the agent's dead-man switch (which must stay free of the client's
// dependencies), and depends on nothing but the standard library.
package vasterr

import (
	"bytes"
	"encoding/json"
	"strings"
)

// body is the union of the error shapes vast.ai sends.
type body struct {
	Error   json.RawMessage `json:"error"`
	Msg     json.RawMessage `json:"msg"`
	Message json.RawMessage `json:"message"`
	Detail  json.RawMessage `json:"detail"`
}

// Text renders a JSON value as text: strings unquoted, others compact.
func Text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Parse pulls the code ("error") and message ("msg", "message" or
// "detail") out of an answer; isJSON is false for anything but a JSON
// object, whose whole text is then the message (untrimmed).
func Parse(b []byte) (code, msg string, isJSON bool) {
	var eb body
	if json.Unmarshal(b, &eb) == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		code = Text(eb.Error)
		if code == "true" || code == "false" {
			code = "" // {"error": true, ...} is a flag, not a code
		}
		for _, m := range []json.RawMessage{eb.Msg, eb.Message, eb.Detail} {
			if msg = Text(m); msg != "" {
				break
			}
		}
		return code, msg, true
	}
	return "", string(b), false
}

// Auth reports whether an answer means the key was refused: 401, and 403
// unless it is about money, always; other statuses only when the body says
// so, because a revoked key has been seen as 404 auth_error and a stale 2FA
// session as 404 "Session expired. Please log in again."
func Auth(status int, code, msg string) bool {
	code, msg = strings.ToLower(code), strings.ToLower(msg)
	if status == 401 || status == 403 && !Balance(code, msg) {
		return true
	}
	if code == "auth_error" || code == "invalid_token" || code == "unauthorized" {
		return true
	}
	if status == 404 || status == 400 {
		for _, w := range []string{"api key", "user key", "invalid key", "session", "log in", "login", "sign up", "unauthorized", "authenticat"} {
			if strings.Contains(msg, w) {
				return true
			}
		}
	}
	return false
}

// Balance reports whether an answer is about the account's money.
func Balance(code, msg string) bool {
	code, msg = strings.ToLower(code), strings.ToLower(msg)
	for _, w := range []string{"insufficient", "balance", "credit", "not enough funds", "payment"} {
		if strings.Contains(code, w) || strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// Gone reports whether an answer to a call about one instance proves that
// instance does not exist: vast's codes for it, or a JSON 404 that is not
// about the key. A 404 page that is not vast's JSON (a proxy's) proves
// nothing.
func Gone(status int, code, msg string, isJSON bool) bool {
	if Auth(status, code, msg) {
		return false
	}
	switch strings.ToLower(code) {
	case "no_such_instance", "not_found", "invalid_id":
		return true
	}
	return status == 404 && isJSON
}
