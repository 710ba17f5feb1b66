package server

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// ContextsPath is the client's contexts file: $VASTFLEET_CONFIG/contexts.json,
// else the user's config dir's vastfleet/contexts.json.
func ContextsPath(getenv func(string) string) (string, error) {
	dir := getenv("VASTFLEET_CONFIG")
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(d, "vastfleet")
	}
	return filepath.Join(dir, "contexts.json"), nil
}

// ClientFor is the server a command talks to, if any: serverURL (with
// token, or the token of a context for that URL), else the current
// context of the contexts file at path (token overriding its own).
// serverURL Local, or no context, is none: nil.
func ClientFor(path, serverURL, token, version string) (*Client, error) {
	if serverURL == Local {
		return nil, nil
	}
	cs, err := LoadContexts(path)
	if err != nil {
		return nil, err
	}
	var c *Context
	if serverURL != "" {
		c = &Context{URL: serverURL}
		for _, n := range cs.Names() {
			if strings.TrimRight(cs.Contexts[n].URL, "/") == strings.TrimRight(serverURL, "/") {
				c = cs.Contexts[n]
				break
			}
		}
	} else if c = cs.Active(); c == nil {
		return nil, nil
	}
	cl := &Client{URL: c.URL, Token: c.Token, Pin: c.Pin, Version: version}
	if token != "" {
		cl.Token = token
	}
	return cl, nil
}

// NewContext is a context as `context add` makes it: its token read from
// tokenFile, its pin parsed (either may be "").
func NewContext(name, url, tokenFile, pin string) (Context, error) {
	c := Context{Name: name, URL: url}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return c, usage.Error{Err: err}
		}
		c.Token = strings.TrimSpace(string(b))
	}
	if pin != "" {
		p, err := certpin.Parse(pin)
		if err != nil {
			return c, usage.Errorf("--pin: %v", err)
		}
		c.Pin = p
	}
	return c, nil
}

// EditContexts loads the contexts file at path, lets edit change it, and
// saves it unless edit fails.
func EditContexts(path string, edit func(*Contexts) error) error {
	cs, err := LoadContexts(path)
	if err != nil {
		return err
	}
	if err := edit(cs); err != nil {
		return err
	}
	return cs.Save(path)
}

// ContextRow is one line of `context ls`.
type ContextRow struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Current  bool   `json:"current"`
	HasToken bool   `json:"has_token"`
}

// ContextHeader names the columns of ContextRow.Cells.
var ContextHeader = []string{"CURRENT", "NAME", "URL", "TOKEN"}

// Cells is the context as context ls shows it: the current one marked.
func (r ContextRow) Cells() []string {
	cur, tok := "", ""
	if r.Current {
		cur = "*"
	}
	if r.HasToken {
		tok = "yes"
	}
	return []string{cur, r.Name, r.URL, tok}
}

// Rows are the contexts as `context ls` lists them: Local first, then by
// name; never the tokens.
func (c *Contexts) Rows() []ContextRow {
	rows := []ContextRow{{Name: Local, Current: c.Current == ""}}
	for _, n := range c.Names() {
		ctx := c.Contexts[n]
		rows = append(rows, ContextRow{Name: n, URL: ctx.URL, Current: c.Current == n, HasToken: ctx.Token != ""})
	}
	return rows
}
