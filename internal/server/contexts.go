package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
)

// Local is the context that means no server: commands run in-process.
const Local = "local"

// Context is a server the command line talks to, as docker and kubectl
// contexts are: its URL, the token to present, the certificate pin.
type Context struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	Pin   string `json:"pin,omitempty"`
}

// Contexts is the client's contexts file (0600: it holds tokens).
type Contexts struct {
	Current  string              `json:"current,omitempty"`
	Contexts map[string]*Context `json:"contexts"`
}

// LoadContexts reads the contexts file; a missing one is empty.
func LoadContexts(path string) (*Contexts, error) {
	c := &Contexts{Contexts: map[string]*Context{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("contexts file %s: %w", path, err)
	}
	if c.Contexts == nil {
		c.Contexts = map[string]*Context{}
	}
	return c, nil
}

// Save writes the contexts file atomically, private to its owner.
func (c *Contexts) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// Add adds (or replaces) a context.
func (c *Contexts) Add(ctx Context) error {
	if ctx.Name == "" || ctx.Name == Local {
		return fmt.Errorf("context name %q: %q means no server", ctx.Name, Local)
	}
	u, err := url.Parse(ctx.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("context %s: URL %q: want http(s)://HOST:PORT", ctx.Name, ctx.URL)
	}
	c.Contexts[ctx.Name] = &ctx
	return nil
}

// Use makes name the current context (Local: none).
func (c *Contexts) Use(name string) error {
	if name != Local && c.Contexts[name] == nil {
		return fmt.Errorf("no context %q (`vastfleet context ls`)", name)
	}
	c.Current = name
	if name == Local {
		c.Current = ""
	}
	return nil
}

// Active is the current context, nil for none.
func (c *Contexts) Active() *Context { return c.Contexts[c.Current] }

// Names are the contexts' names, sorted.
func (c *Contexts) Names() []string {
	var out []string
	for n := range c.Contexts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
