package launch

// The planner, as Nomad's scheduler plans: each tick the runner observes
// the marketplace into the model, the model's planner methods turn what
// was observed into actions, with their reasons, and the runner applies
// them (apply.go) through its FleetOps. The planner does no I/O: it moves
// the model's nodes and counts and says what it decided.

// ActionKind is what an Action does to the fleet or its record.
type ActionKind string

// What a plan asks.
const (
	ActRent    ActionKind = "rent"    // rent Offer
	ActPark    ActionKind = "park"    // stop a booted Instance until the release
	ActRelease ActionKind = "release" // start a parked Instance
	ActReplace ActionKind = "replace" // destroy a failed Instance; a rent fills its slot
	ActDestroy ActionKind = "destroy" // destroy an Instance the fleet no longer needs
	ActRebid   ActionKind = "rebid"   // raise an outbid Instance's bid to Price
	ActMarkBad ActionKind = "mark-bad"
	// ActRecordRelease records that the release wave began (a resume
	// after a crash finishes it).
	ActRecordRelease ActionKind = "record-release"
	ActSay           ActionKind = "say" // emit Event
)

// Action is one step of a plan, and why.
type Action struct {
	Kind     ActionKind
	Instance int64
	Offer    int64
	Machine  int64   // mark-bad: the machine put on the bad-host list
	Price    float64 // rebid: the new bid, $/hr
	Reason   string
	Event    *Event // say: what to emit
}

// say adds an event to the plan.
func (m *model) say(e Event) { m.plan = append(m.plan, Action{Kind: ActSay, Event: &e, Reason: e.Msg}) }

// act adds an action to the plan.
func (m *model) act(a Action) { m.plan = append(m.plan, a) }

// take hands over what was planned since the last take.
func (m *model) take() []Action {
	p := m.plan
	m.plan = nil
	return p
}
