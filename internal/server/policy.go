package server

import (
	"fmt"
	"slices"
	"strings"
)

// Op is a command a client may have the server run, the least role that
// may run it, and the flags it may pass (by long name; a client sends
// every flag as --name or --name=value). Global flags (--data-dir,
// --market, --api-key, --api-url…) are never among them: the server runs
// every command in its own data dir, on its own market, with its own key.
type Op struct {
	Role  string
	Flags []string
	// AnyArgs: positionals are free text (a launch's query); otherwise
	// each is a job's name or an instance id, never a path.
	AnyArgs bool
}

// Ops are the commands the server runs for clients. `up` is not among
// them: a job is submitted (POST /v1/jobs) and runs in the server's job
// runner.
var Ops = map[string]Op{
	"status":  {Role: RoleViewer, Flags: []string{"json", "jq"}},
	"ls":      {Role: RoleViewer, Flags: []string{"json", "jq", "fleet", "all"}},
	"cost":    {Role: RoleViewer, Flags: []string{"json", "jq", "fleet"}},
	"logs":    {Role: RoleViewer, Flags: []string{"json", "jq", "node", "session", "tail"}},
	"down":    {Role: RoleOperator, Flags: []string{"json", "jq", "no-collect"}},
	"destroy": {Role: RoleOperator, Flags: []string{"all", "yes", "fleet", "force"}},
	"launch": {Role: RoleOperator, Flags: []string{"json", "jq", "count", "min-ready", "deadline", "park", "max-dph", "budget",
		"image", "disk", "fleet", "no-default", "type", "order", "limit", "by"}, AnyArgs: true},
}

// ActionSubmit is the audit log's name for a submitted job.
const ActionSubmit = "submit"

// allowed says whether role may do an action: an op at its role, any
// other action (submit, reading the audit log) as an operator.
func allowed(role, action string) bool {
	need := RoleOperator
	if op, ok := Ops[action]; ok {
		need = op.Role
	}
	if action == ActionResults {
		need = RoleViewer
	}
	return role == RoleOperator || need == RoleViewer && role == RoleViewer
}

// checkArgs checks a command's arguments against its op: flags by name,
// positionals that cannot be read as flags.
func checkArgs(op string, args []string) error {
	o, ok := Ops[op]
	if !ok {
		return fmt.Errorf("the server does not run %q (it runs %s, and up)", op, opNames())
	}
	for _, a := range args {
		if a == "--" {
			return fmt.Errorf("%s: -- is not taken by the server", op)
		}
		if !strings.HasPrefix(a, "-") {
			if !o.AnyArgs && !jobName.MatchString(a) {
				return fmt.Errorf("%s: %q is not a job's name or an instance id", op, a)
			}
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !slices.Contains(o.Flags, name) {
			return fmt.Errorf("%s: flag %q is not taken by the server (it takes %s)", op, a, strings.Join(o.Flags, ", "))
		}
	}
	return nil
}

func opNames() string {
	var names []string
	for _, n := range []string{"status", "ls", "cost", "logs", "down", "destroy", "launch"} {
		if _, ok := Ops[n]; ok {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}
