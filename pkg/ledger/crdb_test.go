package ledger_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/cockroach-go/v2/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// The optional CockroachDB lane (make test-crdb). TestCockroachDB migrates a ledger on
// CockroachDB with atmost's migrator, then runs the tests below, unchanged, each on its own
// freshly migrated CockroachDB database (dbtest.UseCockroachDB). It skips where no CockroachDB
// can be had: these machines have none, so CI runs the same tests on PostgreSQL only.
//
// Left out: what measures PostgreSQL itself rather than the ledger. The interleaving tests
// ("...ThatWaitedOn...") detect the second transaction's lock wait in pg_stat_activity, and the
// plan test reads PostgreSQL's EXPLAIN.
var cockroachSuite = []func(*testing.T){
	// The state machine, end to end.
	TestSubmitCreatesOnceAndReportsDuplicates,
	TestPublishedPathWritesOneAttemptAndAHistoryRowPerTransition,
	TestSuccessWithoutReadBackIsIndeterminate,
	TestProvenNotSentFailsAndReleasesTheText,
	TestRetryWritesNoAttemptAndTheNextBeginWritesExactlyOne,
	TestRetryOutsideFailedIsRefused,
	TestAttemptCapExhaustionParksInsteadOfLooping,
	TestBeginParksWhenTheCapWasLoweredUnderAPendingIntent,
	TestAnOutcomeCarryingNULIsStillRecorded,
	TestMalformedOutcomesArePermanentErrors,
	TestEveryPhaseAndOperationFollowsTheTransitionTable,

	// The spec's concurrency cases, at both isolation levels.
	TestConcurrentBeginsOpenExactlyOneAttempt,
	TestBeginAfterACrashBeforeAuthorizeSeesTheLiveClaim,
	TestStaleWorkerBeforeAuthorizationIsRefusedAndTheIntentFreed,
	TestVanishedAuthorizedWorkerIsNeverRecoveredToPending,
	TestExpireLeasesAbandonsClaimsAndFreesThem,
	TestConcurrentSweepersExpireEachLeaseOnce,
	TestFencedLateCompleteIsRefusedAndKeptAsEvidence,
	TestCompleteAfterExpiryIsEvidenceOnly,
	TestEpochBumpRefusesEveryClaimOfTheOldEpoch,
	TestRequestHashIsBoundToTheAttempt,
	TestATokenFromAnotherAttemptIsRefused,
	TestTransactionRestartsAfterASerializationFailureAtCommit,
	TestTransactionGivesUpAfterMaxRetries,
	TestALateCompleteFromAnEarlierAuthorizedAttemptIsFenced,
	TestACompletionFromAnOldEpochIsFenced,
	TestRandomOperationsKeepTheInvariants,

	// Single guards.
	TestCompleteWithAnotherAttemptsTokenIsFenced,
	TestCompleteFromAnotherEpochIsFenced,
	TestCompleteFromAnotherGenerationIsFenced,
	TestAuthorizeFromAnotherEpochIsFenced,
	TestAuthorizeAtExactlyTheLeaseDeadlineIsRefused,
	TestOnlyAProvenNotSentReleasesTheText,
	TestANotSentReleasesOnlyItsOwnTextClaim,
	TestRateBucketRefillsAtItsRateUpToItsBurst,
	TestALookupOfAnEarlierAttemptCannotResolveTheIntent,
	TestALookupResolvedAfterTheOperatorParkedIsRefused,
	TestEvidenceNeverOverridesADecidedState,
	TestALateIntentOnAnOlderVersionNeverTurnsTheHeadBack,
	TestOnlyACreatedIntentMovesTheHead,
	TestAuthorizeManyTakesOnlyTheTokensTheBucketHolds,
	TestStatementsRefuseTargetStatesOutsideTheirTransitions,

	// Authorization's gates: switches, revocation, source heads, the rate limit, the text window.
	TestAuthorizeRechecksEveryGate,
	TestAuthorizeRefusesASupersededSource,
	TestAuthorizeAcceptsTheStoredHead,
	TestAuthorizeTakesOneRateTokenPerAuthorization,
	TestDuplicateTextAtTheWindowEdge,
	TestTheTextGoesToTheIntentStoredFirst,
	TestAnEarlierIntentThatWaitsKeepsItsText,
	TestAClaimOnceTakenIsNeverTakenBack,
	TestTheOriginalWinsTheTextWhenTwoDispatchersRace,

	// The batch forms the workers call.
	TestBeginManyAnswersEachIntentOnItsOwn,
	TestAuthorizeManySharesTheRateBucketInStoredOrder,
	TestAuthorizeManyGivesOneTextClaimPerText,
	TestCompleteManyFencesEachReportOnItsOwn,
	TestOverlappingBatchesClaimEachIntentOnce,
	TestBatchesAcrossAccountsNeverDeadlock,

	// Reconciliation: one claimed lookup per unknown attempt.
	TestReconciliationIsClaimedExactlyOnceUnderConcurrentReconcilers,
	TestReconciliationResultsLeadWhereTheTableSays,
	TestResolveWithoutAClaimedLookupIsRefused,
	TestClaimReconciliationOutsideIndeterminateIsRefused,
	TestLateEvidenceResolvesWithoutALookup,
	TestParkIsRefusedWhileAnAuthorizedLeaseIsLive,
	TestOperatorResolutionNeedsEvidenceAndIsRecorded,
	TestEpochBumpIsRecordedAndNewClaimsCarryIt,
	TestNotSentLookupAgainstReportedSuccessIsParked,
	TestUnconfirmedSuccessIsNotEvidenceEnough,

	// The sweeper's queries, on the database's clock.
	TestStrandedPendingFindsOnlyUnclaimedIntentsIdlePastTheThreshold,
	TestRetryDueRetriesRetryableReasonsAfterTheBackoffOnly,
	TestRetryDueParksAnIntentAtItsAttemptCap,
	TestRetryDueReleasesABacklogAtThePolicyRate,
	TestParkUnreconciledParksLostLookupsAndForgottenIntentsOnly,
	TestParkUnsendableOnlyFromPendingWithoutAClaim,
	TestReconcileCandidatesAndStatusReadTheDatabaseClock,

	// Accounts and operator controls, and the append-only grants of the application role.
	TestAccountsAreAddedOnceAndValidated,
	TestRotateAndRevokeReachAuthorization,
	TestKillSwitchThroughTheLedgerStopsAuthorization,
	TestPolicyOverridesInheritTheDefault,
	TestSetPolicyChangesOnlyTheFieldsItNames,
	TestSetPolicyRefusesWhatItCannotStore,
	TestEveryControlChangeIsRecordedWithItsOperator,
	TestAppRoleCannotRewriteTheControlHistory,
	TestSourceHeadAdvancesToTheNewestVersionWhateverIsStored,
	TestSubmittingANewVersionSupersedesTheStoredHead,

	// The restore protocol's ledger side: one transaction of separate statements (CockroachDB
	// refuses a statement that modifies a table twice), the blocks and the restored point.
	TestRestoreMovesAnIntentTheStreamShowsAuthorizedToIndeterminate,
	TestRestorePublishesWhatTheStreamShowsPublished,
	TestRestoreDoesNotMoveAnIntentWhoseLedgerIsNotBehind,
	TestRestoreNeverLeavesPublished,
	TestRestoreResumesPendingOnlyWhenNothingAheadWasAuthorized,
	TestRestoreNeverMakesAnIntentTheStreamShowsAuthorizedPending,
	TestRestoreRecreatesAnIntentTheLedgerLacksFromItsEnvelope,
	TestRestoreDryRunChangesNothing,
	TestRestoreRefusesMalformedHistories,
	TestRestoreRetakesTheDuplicateTextClaim,
	TestRestoreBlocksAKeyItCannotRecreate,
	TestRestorePointNamesTheNewestHistoryAndTheEpochs,
}

// TestCockroachDB is the CockroachDB lane. It uses the cluster at ATMOST_CRDB_URL, or starts a
// single-node, in-memory one with cockroach-go's testserver from the binary named by
// COCKROACH_BINARY or found on PATH (never downloaded), and skips when it has neither.
func TestCockroachDB(t *testing.T) {
	server := cockroachURL(t)
	t.Run("MigrateCreatesTheDatabaseThenHasNothingToDo", func(t *testing.T) {
		testMigrateOnCockroachDB(t, server)
	})
	dbtest.UseCockroachDB(t, server)
	for _, test := range cockroachSuite {
		t.Run(testName(test), test)
	}
}

// cockroachURL returns the lane's cluster, skipping the test when there is none to be had.
func cockroachURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("ATMOST_CRDB_URL"); u != "" {
		return u
	}
	binary := os.Getenv("COCKROACH_BINARY")
	if binary == "" {
		if path, err := exec.LookPath("cockroach"); err == nil {
			binary = path
		}
	}
	if binary == "" {
		t.Skip("the CockroachDB lane needs ATMOST_CRDB_URL (a running cluster, insecure, whose user may create databases and roles) " +
			"or a cockroach binary on PATH (testserver: COCKROACH_BINARY names one elsewhere; none is ever downloaded)")
	}
	ts, err := testserver.NewTestServer(testserver.CockroachBinaryPathOpt(binary))
	if err != nil {
		t.Fatalf("start CockroachDB from %s with testserver: %v", binary, err)
	}
	t.Cleanup(ts.Stop)
	server := ts.PGURL().String()

	// READ COMMITTED needs a cluster setting (CockroachDB 23.2 and later); where it is off,
	// CockroachDB runs those transactions SERIALIZABLE and the suite's read-committed half
	// proves nothing more than its serializable half.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true`); err != nil {
		t.Logf("READ COMMITTED stays off on this CockroachDB (%v): the read-committed tests run SERIALIZABLE", err)
	}
	return server
}

// testMigrateOnCockroachDB runs what `atmost migrate --create-database` runs: the database is
// created, every migration applied once, and a second run changes nothing.
func testMigrateOnCockroachDB(t *testing.T, server string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	u, err := url.Parse(server)
	require.NoError(t, err)
	name := "atmost_migrate_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "_")
	u.Path = "/" + name
	target := u.String()

	admin, err := pgx.Connect(ctx, server)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		require.NoError(t, err)
		require.NoError(t, admin.Close(context.Background()))
	})

	latest, err := migrate.Latest()
	require.NoError(t, err)
	applied, err := migrate.Up(ctx, target, migrate.Options{CreateDatabase: true})
	require.NoError(t, err, "migrate a new database on CockroachDB")
	require.Len(t, applied, int(latest), "every migration applied")
	again, err := migrate.Up(ctx, target, migrate.Options{CreateDatabase: true})
	require.NoError(t, err)
	require.Empty(t, again, "a second run applies nothing")
	current, err := migrate.Current(ctx, target)
	require.NoError(t, err)
	require.Equal(t, latest, current)
}

// testName is a test function's name without its package and "Test".
func testName(test func(*testing.T)) string {
	name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
	return strings.TrimPrefix(name[strings.LastIndex(name, ".")+1:], "Test")
}
