package coord

import "testing"

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
