package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps imports pointing one way: cli -> factory
// -> domain packages; packages never import the CLI or the factory, and
// the contracts and pure packages never link the adapters. It is the one
// place these rules live; a forbidden path also forbids the packages
// below it.
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	const mod = "github.com/vastfleet/vastfleet/internal/"
	never := map[string][]string{
		"market":   {"net/http", "database/sql", mod + "provider", mod + "sim", mod + "store", mod + "cli"},
		"plan":     {"net/http", "database/sql", mod + "provider", mod + "sim", mod + "store", mod + "cli"},
		"provider": {mod + "sim", mod + "store", mod + "fleet", mod + "launch", mod + "cli", "database/sql"},
		// The simulator is vast as documented, written apart from the
		// client: sharing the client's offers, query engine or billing would
		// make every test that compares the two compare code with itself.
		"sim": {mod + "market", mod + "provider", mod + "plan", mod + "store", mod + "fleet", mod + "launch", mod + "cli", "database/sql"},
		// The local market is the simulator kept alive between commands:
		// it serves the simulator and links nothing of the client.
		"localmarket": {mod + "market", mod + "provider", mod + "plan", mod + "store", mod + "fleet", mod + "launch", mod + "cli", "database/sql"},
		// The machine behind a simulated instance knows nothing of the
		// market, the marketplace contract or the store.
		"sim/host": {mod + "market", mod + "provider", mod + "plan", mod + "store", mod + "fleet", mod + "launch", mod + "cli", "net/http", "database/sql"},
		// The SSH layer takes targets and gives sessions; it knows nothing of
		// the store or the marketplace.
		"remote": {mod + "provider", mod + "store", mod + "sim", mod + "fleet", mod + "launch", mod + "cli", "net/http", "database/sql"},
		"store":  {"net/http", mod + "provider", mod + "sim", mod + "fleet", mod + "cli"},
		"fleet":  {mod + "sim", mod + "launch", mod + "cli", mod + "provider/vast"},
		"launch": {mod + "cli", mod + "sim", mod + "provider/vast", "net/http/httptest"},
		// The coordinator gets costs from the CLI as a function and keeps
		// its own database, so it never holds the store's lock.
		"coord": {mod + "provider", mod + "store", mod + "sim", mod + "fleet", mod + "launch", mod + "cli"},
		// What agents and the coordinator say to each other: stdlib only,
		// so the agent binary stays small.
		"wire": {mod + "provider", mod + "store", mod + "sim", mod + "fleet", mod + "launch", mod + "cli", mod + "market", "database/sql", "net/http"},
		// What vast's error answers say (bad key, instance gone): stdlib
		// only, shared by the client and the agent's dead-man switch.
		"vasterr": {mod + "provider", mod + "market", mod + "store", mod + "wire", "net/http", "database/sql"},
		// The agent binary runs on rented machines: no marketplace client,
		// no store.
		"agent": {mod + "provider", mod + "market", mod + "store", mod + "sim", "database/sql"},
		// Pattern matching is a leaf: no files, no network, no project package.
		"ignore": {"net", "os", mod + "remote", mod + "provider", mod + "store", mod + "market"},
		// Time is a leaf: the clocks link no network and no project
		// package, so the SSH layer and the agent can take one; the clock
		// of a simulator served elsewhere (clock/remoteclock) needs
		// net/http and stays apart.
		"clock": {"net", "os", "database/sql", mod + "provider", mod + "store", mod + "sim", mod + "fleet", mod + "launch", mod + "cli", mod + "remote", mod + "coord", mod + "agent", mod + "market", mod + "wire"},
		// A job takes its market, store, nodes and coordinator as one Deps:
		// it names no adapter, no SSH layer (Deps.Nodes is) and no command-line
		// library, so it builds wherever the contracts do.
		"job": {mod + "cli", mod + "sim", mod + "provider/vast", mod + "clock/remoteclock", mod + "remote", "github.com/spf13/cobra"},
		// The server takes what runs a command as a function: it names no
		// adapter, holds no market or store of its own (its tokens, audit log
		// and jobs are its own database), and no command-line library.
		"server": {mod + "cli", mod + "sim", mod + "provider", mod + "store", mod + "fleet", mod + "launch", mod + "job", mod + "coord", "github.com/spf13/cobra"},
		// The tests' PostgreSQL is the driver and the binaries: no vastfleet
		// package, so any package's tests may use it.
		"server/pgtest": {mod + "cli", mod + "store", mod + "coord", mod + "sim", mod + "job", "modernc.org/sqlite"},
		// The bill's reconciliation takes the marketplace through the
		// contract (provider.Charger), never an adapter.
		"bill": {mod + "cli", mod + "sim", mod + "provider/vast", mod + "launch", mod + "job"},
		// Node operations take the store and the marketplace through their
		// contracts, and no command-line library.
		"nodes": {mod + "cli", mod + "sim", mod + "provider/vast", mod + "launch", mod + "job", "github.com/spf13/cobra"},
		// Searching takes the marketplace through the contract.
		"search": {mod + "cli", mod + "sim", mod + "provider/vast", mod + "store", mod + "launch", "database/sql", "github.com/spf13/cobra"},
		// The migration rule knows database/sql and no driver.
		"sqlschema": {"modernc.org/sqlite", mod + "store", mod + "coord", mod + "server"},
		// The live view is a terminal widget: it knows no market, store or job.
		"liveview": {mod + "cli", mod + "provider", mod + "store", mod + "market", mod + "job", mod + "launch", "github.com/spf13/cobra"},
		// The demo scripts a job through the Up it is given: no adapter, no
		// SSH layer, no command-line library.
		"demo": {mod + "cli", mod + "sim", mod + "provider/vast", mod + "remote", "github.com/spf13/cobra"},
		// bench scale measures what the user runs: it drives the vastfleet
		// binary as processes and links none of what that binary does.
		"scalebench": {mod + "cli", mod + "sim", mod + "provider", mod + "store", mod + "coord", mod + "launch", mod + "fleet", mod + "market", mod + "agent", "database/sql", "github.com/spf13/cobra"},
		// A depth plot draws ranked offers it is given: no marketplace, no store.
		"depthplot": {mod + "cli", mod + "provider", mod + "store", mod + "sim", "net/http", "github.com/spf13/cobra"},
		// bench rank drives the binary and the recipe as processes and a
		// simulator it serves: it links no store, fleet or command line.
		"benchrank": {mod + "cli", mod + "sim", mod + "store", mod + "fleet", mod + "launch", "database/sql", "github.com/spf13/cobra"},
		// bench offers rents through the fleet manager and reaches nodes
		// through the node operations: no adapter, no command line.
		"offerbench": {mod + "cli", mod + "sim", mod + "provider/vast", "github.com/spf13/cobra"},
		// Flag ranges are about flags alone: pflag, never the command tree.
		"flagrange": {mod + "cli", "github.com/spf13/cobra", "net/http", "database/sql"},
		// The usage mark is a leaf every domain package may take.
		"usage": {"net/http", "database/sql", mod + "provider", mod + "store", mod + "coord", mod + "cli"},
		// Onstart scripts are text; writing them needs no network.
		"bootstrap": {"net/http", "database/sql", mod + "provider", mod + "store", mod + "sim", mod + "cli"},
		// The bid watcher lists through the fleet manager it is given: no
		// adapter, no command line.
		"bidwatch": {mod + "cli", mod + "sim", mod + "provider/vast", "github.com/spf13/cobra"},
		// Leaves: JSON arrays and build info know no market, store or
		// command line.
		// The composition root builds adapters; it never reaches back
		// into the command tree or its command-line library.
		"factory": {mod + "cli", "github.com/spf13/cobra"},
		// What reporting commands share, and the terminal's streams: no
		// market, store or factory, so any command may take them; and no
		// command-line library, so a domain package writes its own report
		// with cmdutil's table and formats.
		"cmdutil":   {mod + "cli", mod + "factory", mod + "provider", mod + "store", mod + "market", "net/http", "database/sql", "github.com/spf13/cobra"},
		"iostreams": {mod + "cli", mod + "factory", mod + "cmdutil", mod + "provider", mod + "store", "net/http", "database/sql", "github.com/spf13/cobra"},
		"jsonarray": {mod + "market", mod + "provider", mod + "store", mod + "cli", "net/http", "database/sql"},
		"buildinfo": {mod + "market", mod + "provider", mod + "store", mod + "cli", "net/http", "database/sql"},
	}
	// The factory is the one composition root: the command tree and the
	// binaries take it, no domain package does.
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/vastfleet/vastfleet/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == mod+"cli" || strings.HasPrefix(fields[0], "github.com/vastfleet/vastfleet/cmd/") {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == mod+"factory" {
				t.Errorf("%s imports internal/factory: only internal/cli and cmd/ may", fields[0])
			}
		}
	}
	// The command tree names no wiring the factory owns: the agent binary a
	// coordinator serves (factory.StartCoord), the data dir's replica
	// (factory.Replicate, Restore) and the SSH layer (factory.LaunchChecks,
	// node operations). Its direct imports, as the factory links them.
	direct, err := exec.Command(gobin, "list", "-f", "{{join .Imports \" \"}}", mod+"cli").Output()
	if err != nil {
		t.Fatalf("go list cli: %v", err)
	}
	for _, imp := range strings.Fields(string(direct)) {
		if imp == mod+"agentbin" || imp == mod+"replica" || imp == mod+"remote" {
			t.Errorf("internal/cli imports %s: wire it in internal/factory", imp)
		}
	}
	for pkg, forbidden := range never {
		// Test-only dependencies (the simulator in fleet's tests) are fine:
		// -deps without -test lists what the package itself links.
		out, err := exec.Command(gobin, "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range forbidden {
			for d := range deps {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("internal/%s links %s", pkg, d)
				}
			}
		}
	}
}
