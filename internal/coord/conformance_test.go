package coord

import (
	"strings"
	"testing"
)

// TestStoreConformance runs the tests of what the coordinator keeps in
// its database (items and their leases, validation and trust,
// credentials, tokens, findings, saved heartbeats, a restart) on each
// backend: SQLite, and PostgreSQL where there is one (skipped where
// there is none, unless VASTFLEET_REQUIRE_POSTGRES is set, as in CI).
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, backend string)
	}{
		{"AddItemsIsIdempotent", testAddItemsIsIdempotent},
		{"ItemLeaseExpiresWhenItsNodeGoesQuiet", testItemLeaseExpiresWhenItsNodeGoesQuiet},
		{"ItemResultIsStoredOnce", testItemResultIsStoredOnce},
		{"ItemsSurviveACoordinatorRestart", testItemsSurviveACoordinatorRestart},
		{"ReplicasGoToDistinctMachines", testReplicasGoToDistinctMachines},
		{"ItemsStarvedWhenEveryMachineDisagrees", testItemsStarvedWhenEveryMachineDisagrees},
		{"VerifyRejectsWrongResultsAndFindings", testVerifyRejectsWrongResultsAndFindings},
		{"SpotCheckCatchesATrustedLiarAndItsResultsAreRechecked", testSpotCheckCatchesATrustedLiarAndItsResultsAreRechecked},
		{"FleetTokensAreStablePrivateAndHashed", testFleetTokensAreStablePrivateAndHashed},
		{"ReplayedFindingsAreAckedAgainAndStoredOnce", testReplayedFindingsAreAckedAgainAndStoredOnce},
		{"StateAndFindingsSurviveARestart", testStateAndFindingsSurviveARestart},
		{"FindingsShowTheCoordinatorsClock", testFindingsShowTheCoordinatorsClock},
		{"LastMetrics", testLastMetrics},
		{"GroupCommitStoresEachKeyOnce", testGroupCommitStoresEachKeyOnce},
		{"AThousandEnrollAtOnce", testAThousandEnrollAtOnce},
		{"ForgedRequestsAreRefused", testForgedRequestsAreRefused},
		{"NewerSchemaIsRefused", testNewerSchemaIsRefused},
	}
	for _, backend := range backends {
		t.Run("db="+backend, func(t *testing.T) {
			t.Parallel()
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, backend)
				})
			}
		})
	}
}

// testNewerSchemaIsRefused: a database a newer vastfleet migrated is
// refused, not written to.
func testNewerSchemaIsRefused(t *testing.T, backend string) {
	store := newTestStore(t, backend, false)
	db := store.open(t)
	bump := `PRAGMA user_version = 99`
	if backend == postgresBackend {
		bump = `UPDATE vastfleet_coord_version SET v = 99`
	}
	if _, err := db.w.ExecContext(t.Context(), bump); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err := Open(t.Context(), store.where, store.tokens); err == nil || !strings.Contains(err.Error(), "newer than this vastfleet knows") {
		if err == nil {
			db.Close()
		}
		t.Fatalf("opening a newer schema: %v", err)
	}
}
