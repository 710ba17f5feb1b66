// Package shell writes words for a POSIX shell (/bin/sh on a node, the
// user's shell for a printed command line): the one quoting rule for
// onstart scripts, remote commands, item values and printed commands.
package shell

import "strings"

// plain are the bytes a word may hold and still need no quotes.
const plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@=+"

// Quote is s as one shell word, whatever it contains: as is when every
// byte is plain, else in single quotes (a quote inside closes them, is
// escaped, and opens them again).
func Quote(s string) string {
	if s != "" && strings.Trim(s, plain) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join is args as one command line, each quoted.
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}
