package launch

import (
	"github.com/vastfleet/vastfleet/internal/itemspec"
	"github.com/vastfleet/vastfleet/internal/usage"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// AgentWork is what the agent runs on each instance: the sessions, and
// the items parsed from itemsFlag (--items), which need a session that
// names wire.ItemPlaceholder, as such a session needs items.
func AgentWork(sessions []Session, itemsFlag string) ([]wire.Session, []string, error) {
	var out []wire.Session
	workers := 0
	for _, s := range sessions {
		ws := wire.Session{Name: s.Name, Command: s.Command, Restart: s.Restart, After: s.After}
		if ws.IsItemWorker() {
			workers++
		}
		out = append(out, ws)
	}
	switch {
	case itemsFlag != "" && workers == 0:
		return nil, nil, usage.Errorf("--items: no --session names %s in its command, so nothing would run the items", wire.ItemPlaceholder)
	case itemsFlag == "" && workers > 0:
		return nil, nil, usage.Errorf("a --session names %s: give the items with --items", wire.ItemPlaceholder)
	case itemsFlag == "":
		return out, nil, nil
	}
	items, err := itemspec.ParseItems(itemsFlag)
	if err != nil {
		return nil, nil, usage.Error{Err: err}
	}
	return out, items, nil
}
