package provider

import "context"

// BulkStateChanger starts or stops many instances in one call (vast: PUT
// /api/v0/instances/ with {"state", "ids"}, in chunks of 64), where the
// marketplace allows single starts and stops about one a second per
// account: releasing 300 parked instances one by one would take five
// minutes.
type BulkStateChanger interface {
	// SetStates asks every instance of ids to run (running) or stop. It
	// returns the ids the marketplace said it could not change; err is a
	// call that failed as a whole (then nothing is known of its chunk).
	SetStates(ctx context.Context, ids []int64, running bool) (failed []int64, err error)
}

// BulkChunk is how many ids one bulk call carries, as the vastai CLI
// sends them.
const BulkChunk = 64

// BulkCreator rents many offers in one call (vast: POST /api/v0/asks/bulk/
// with the create body plus "ids"), where single creates are limited to a
// few a second per account: 1,000 of them take minutes of a launch's
// deadline.
type BulkCreator interface {
	// CreateInstances asks for every offer of offerIDs (at most BulkChunk)
	// with one body, and so one label. The marketplace does not document
	// what it answers per offer, so nothing is read from it: the caller
	// finds what was rented by listing the label. An error for which
	// Classify says Refused rented nothing; any other error may have
	// rented some of the offers.
	CreateInstances(ctx context.Context, offerIDs []int64, req CreateRequest) error
}
