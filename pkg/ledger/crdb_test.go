package ledger_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
// Every other test of this package is in cockroachLeftOut with the reason, and
// TestTheCockroachLaneNamesEveryLedgerTest keeps the two lists complete.
var cockroachSuite = []func(*testing.T){
	// Time and cancel: not_before, expires_at and the producer's cancel.
	TestBeginOpensNoAttemptBeforeNotBefore,
	TestAuthorizeRefusesAClaimBeforeNotBefore,
	TestBeginParksAnExpiredIntent,
	TestAuthorizeParksAClaimThatExpired,
	TestAnExpiredIntentIsNeverSentAfterARetryAHoldOrARestore,
	TestTheFirstStoredTimesStand,
	TestConcurrentBeginsOnANotDueIntentWriteNothing,
	TestStrandedPendingWaitsForNotBeforeThenCountsAtOnce,
	TestARestoredIntentKeepsItsTimes,
	TestCancelParksAnIntentNotYetAuthorized,
	TestCancelIsTooLateOnceAuthorized,
	TestCancelIsScopedToTheAccount,
	TestCancelRacingTheDispatcherHasExactlyOneWinner,

	// The state machine, end to end.
	TestSubmitCreatesOnceAndReportsDuplicates,
	TestSubmitTracedStoresTheTraceparentWithTheIntentItCreates,
	TestTheWitnessCarriesTheIntentsTraceparent,
	TestAWriteNamesWhatItLeftInTheOutbox,
	TestAWriteLeavesOutWhatWasAcknowledgedBeforeIt,
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
	TestAnAmbiguousCommitOfAuthorizeIsNeitherRestartedNorARefusal,
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
	TestTheFreshnessFenceParksOnlyFreeIntentsWhoseSourceMovedOn,
	// Replies (reply_to): the parent published gate, and dependency_unmet.
	TestAReplyIsStoredWithItsParent,
	TestAuthorizeHoldsAReplyUntilItsParentIsPublished,
	TestAuthorizeParksAReplyWhoseParentIsParked,
	TestParkDependencyUnmetParksOnlyRepliesWhoseParentEnded,
	TestParkDependencyUnmetLeavesAClaimedReply,
	TestRestoreRecreatesAReplyWithItsParent,
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
	TestALostClaimAnswerIsReclaimedWithItsToken,
	TestOnlyTheClaimsHolderRecordsItsResult,
	TestARepeatedResolveAfterALostAnswerAnswersItsState,
	TestARepeatedCompleteAfterALostAnswerAnswersAsItLanded,
	TestALateReportOfAnotherAttemptIsNoRepeat,
	TestOwnClaimsAreTheClaimsThatStandUnderTheCallersTokens,
	TestParkFromRefusesAStateOutsideItsList,
	TestANoteTheLedgerWillNotStoreIsRefused,
	TestResolveAsFailedWithAnObjectIsRefused,
	TestRetryDueParksEveryIntentAtItsCapWhateverTheRate,
	TestARateLimitedIntentTakesNoClaimOnItsText,
	TestRetryDueDecidesOnTheIntentAsItIsUnderTheRowLock,
	TestAnExpiredLeaseLeavesEvidenceOfWhatItProves,
	TestRetryDueFollowsEachAccountsOwnRetryableReasons,
	TestAFreshClaimIsNotAReclaim,
	TestOperatorsAreAddedRevokedAndAudited,
	TestProducersAreAddedRevokedAndAudited,
	TestAProducerTokenNamesItsAccountsAndNoOther,
	TestAProducerWithoutAccountsIsRefusedByTheSchema,
	TestASuccessTheResponseConfirmsIsPublishedUnread,
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
	TestAnAttemptOpenedBeforeNewSettingsIsRefused,
	TestAnAccountsAdapterIsNotChangedUnderAnIntentInFlight,
	TestEveryAccountChangeIsRecordedWithItsOperator,
	TestADisabledAccountIsNeverAuthorized,
	TestHoldsNameTheGateAndWhoSetIt,
	TestPendingCountsCountEachAccountsPendingIntents,
	TestKillSwitchThroughTheLedgerStopsAuthorization,
	TestPolicyOverridesInheritTheDefault,
	TestSetPolicyChangesOnlyTheFieldsItNames,
	TestSetPolicyRefusesWhatItCannotStore,
	TestHealthPolicyFieldsAreSetLikeTheOthers,
	TestEveryControlChangeIsRecordedWithItsOperator,
	TestAppRoleCannotRewriteTheControlHistory,
	TestSourceHeadAdvancesToTheNewestVersionWhateverIsStored,
	TestSubmittingANewVersionSupersedesTheStoredHead,
	TestTheHeadOfABatchIsItsLastCreatedIntent,

	// What operators read: pages of intents, one intent's record, the rejects, the counts.
	TestListIntentsPagesInKeyOrderAndFilters,
	TestListIntentsPagesThroughTheParked,
	TestListIntentsPagesInTimeOrder,
	TestListIntentsFiltersByTimeAndReason,
	TestInspectIncludesTheReconciliation,
	TestRetryAsRecordsTheOperatorAndTheNote,
	TestRejectsListNewestFirstByReason,
	TestRejectAtFindsTheRejectOfOneStreamMessage,
	TestRejectsStoreAnyBytesFaithfully,
	TestADigestOnlyRejectionKeepsNoBytes,
	TestOutstandingCountsEveryStateButPublished,
	TestOrphansFindsRowsWhoseIntentDoesNotExist,
	TestBrowsePagesNewestFirstThroughEveryState,
	TestBrowseExaminesAtMostTheWindowAndResumesAfterIt,
	TestWaitingAndChangedCountByStateAndReason,

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
	TestRestoreWitnessIsAnAuthorizationTheLedgerHoldsPublished,
	TestRecordedWitnessIsTheNewestAcknowledgedAuthorizationTheLedgerHoldsPublished,

	// The outbox rows a writer forgets leave with its next write, or on their own.
	TestForgottenRowsLeaveWithTheNextWrite,
	TestForgottenRowsLeaveOnTheirOwnWithoutAWrite,
	TestForgottenRowsStayWhenTheWriteFails,
	TestForgottenRowsLeaveAtOnceWhenSerializable,

	// Reject replay: Submit's statement and the control history in one transaction, raced.
	TestAReplayCreatesTheIntentOnceItsCauseIsFixed,
	TestAReplayOfARejectWhoseIntentWasPublishedSinceCreatesNothing,
	TestAReplayAnswersEachRejectOfABatchInOrder,
	TestADryRunReplayChangesNothing,
	TestAReplayOfWhatIsNoStoredRejectWritesNothing,
	TestRejectsToReplaySelectByReasonAndTime,
	TestConcurrentReplaysOfARejectCreateOneIntent,

	// Account health: trips, the gates in Begin and Authorize, the probe's one slot, raced.
	TestHealthTripsOnConsecutiveUnavailableFailures,
	TestHealthCountsOnlyConsecutiveFailures,
	TestHealthThresholdIsThePolicys,
	TestBeginOpensNoAttemptForAHoldingAccount,
	TestAuthorizeHoldsAClaimOfAHoldingAccount,
	TestProbeSlotIsTakenOnce,
	TestProbeSuccessServesAgain,
	TestProbeFailureHoldsLonger,
	TestAuthenticationFailuresHoldUntilResumed,
	TestUnknownOutcomesHoldUntilReconciled,
	TestAttemptCapCountsOnlyAttemptsWhileServing,
	TestConcurrentReportsTripOnce,
	TestAPolicyGovernsEveryFailedReasonItMayName,
	// A suspect account's one attempt in flight, the neutral signal, the adapter's signal.
	TestASuspectAccountLetsOneAttemptInFlight,
	TestALoneIntentDueThroughAnOutageIsNotParkedAtTheTrip,
	TestASuspectSlotRefusedAtAuthorizeIsFreedAtOnce,
	TestAuthorizeHoldsAClaimOpenedBeforeTheFirstFailure,
	TestSuspectSlotIsTakenOnce,
	TestNeutralOutcomesNeverTripAnAccount,
	TestTheAdaptersSignalDecides,
	TestARefusedCredentialIsRetriedWhateverThePolicy,
}

// cockroachLeftOut are the tests of this package the lane does not run, and why: what touches
// no database, and what measures PostgreSQL itself rather than the ledger.
var cockroachLeftOut = map[string]string{
	"TestCockroachDB":                           "the lane itself",
	"TestTheCockroachLaneNamesEveryLedgerTest":  "reads this package's source, no database",
	"TestAuthorizeWaitsForAFailureBeingCounted": "PostgreSQL's READ COMMITTED row locks, seen waiting in pg_stat_activity",

	// The pipelining of pgx (the same on every server) and PostgreSQL's own plan cache.
	"TestTheHotOperationsAreOneRoundTripEach":                           "counts the client's round trips, which do not depend on the server",
	"TestAPipelinedTransactionWhoseCommitFailsFails":                    "a fault injected into the client's batch, which does not depend on the server",
	"TestARefusedPipelinedStatementLeavesTheConnectionUsable":           "a NOT VALID check constraint added and dropped under the test, PostgreSQL's semantics",
	"TestTheOutboxIsReadByItsKeyWhateverItHeldWhenItsPlansWereMade":     "PostgreSQL's plan cache and pg_stat_user_tables; on CockroachDB the outbox's statements are planned as any other (isPostgres)",
	"TestTheHotPathReadsByKeyWhateverTheLedgerHeldWhenItsPlansWereMade": "PostgreSQL's plan cache and pg_stat_user_tables; on CockroachDB the hot statements are planned as any other (isPostgres)",
	"TestARemovalOfOutboxRowsLocksThemInKeyOrder":                       "PostgreSQL's plans of a bitmap scan and pg_stat_activity; on CockroachDB the outbox's statements are planned as any other (isPostgres)",
	"TestARejectReplayPlansSubmitAsTheHotPathDoes":                      "PostgreSQL's plan cache (pg_prepared_statements); on CockroachDB the hot statements are planned as any other (isPostgres)",
	"TestTheHotPathIsPlannedOnceAtAnyBatchSize":                         "PostgreSQL's plan cache (pg_prepared_statements); on CockroachDB the hot statements are planned as any other (isPostgres)",

	// No database: the tables in Go and the SQL files as text.
	"TestEveryDeclaredReasonIsInTheTable":        "no database",
	"TestEveryReasonLeadsToOneOfTheSixStates":    "no database",
	"TestTheStateMachineIsHandedOutAsCopies":     "no database",
	"TestTheReasonTableMatchesTheCode":           "no database",
	"TestEveryGuardNamedIsAStatementOfItsFile":   "no database",
	"TestQueriesWriteOnlyKnownReasons":           "no database",
	"TestTransitionTableHasNoWayBack":            "no database",
	"TestStoredTextRoundTripsAnyBytes":           "no database",
	"TestBrowseNamesEveryReasonOfTheSweptStates": "no database",

	// PostgreSQL's planner: EXPLAIN.
	"TestHotStatementsReachRowsByPrimaryKey":              "PostgreSQL's EXPLAIN",
	"TestThePeoplesQueueIsReadThroughItsIndex":            "PostgreSQL's EXPLAIN",
	"TestConsoleReadsGoThroughThePartialIndexOfEachState": "PostgreSQL's EXPLAIN",

	// The interleavings (interleave) see the second transaction wait for a lock in
	// pg_stat_activity; on CockroachDB the wait would be found in crdb_internal.cluster_locks
	// (docs/cockroachdb.md#a-test-plan-for-a-machine-with-cockroachdb).
	"TestBeginThatWaitedOnAnotherBeginSeesItsClaim":                "pg_stat_activity",
	"TestAWriteNamesWhatATransactionBegunAfterItCommittedBeforeIt": "pg_stat_activity",
	"TestBeginThatWaitedOnAParkIsRefused":                          "pg_stat_activity",
	"TestAuthorizeThatWaitedOnTheSameAuthorizeIsRefused":           "pg_stat_activity",
	"TestAuthorizeThatWaitedOnTheSweeperIsRefused":                 "pg_stat_activity",
	"TestAuthorizeThatWaitedOnANewerClaimIsRefused":                "pg_stat_activity",
	"TestRetryThatWaitedOnAParkIsRefused":                          "pg_stat_activity",
	"TestParkThatWaitedOnAPublishIsRefused":                        "pg_stat_activity",
	"TestParkThatWaitedOnAnAuthorizationIsRefused":                 "pg_stat_activity",
	"TestResolveThatWaitedOnAParkIsRefused":                        "pg_stat_activity",
	"TestSweeperThatWaitedOnANewClaimSparesIt":                     "pg_stat_activity",
	"TestSweeperThatWaitedOnAClaimLeavesTheLookupToItsReconciler":  "pg_stat_activity",
	"TestSwitchSetThatWaitedOnAnotherNeverRecordsAWrongBefore":     "pg_stat_activity",
	"TestPolicySetThatWaitedOnAnotherKeepsItsChange":               "pg_stat_activity",
	"TestPolicySetsThatCreateOneRowAtOnceKeepBothChanges":          "pg_stat_activity",
	"TestSwitchSetThatWaitedOnAChangeRecordsItAsItsBefore":         "pg_stat_activity",
	"TestARetryBucketRefillFromAnEarlierTransactionChangesNothing": "holds a READ COMMITTED transaction open to read now() before another's; CockroachDB runs READ COMMITTED only where the cluster enables it",
	"TestRestoreThatWaitedOnACompletionLeavesItPublished":          "pg_stat_activity",
	"TestConcurrentAddsOfOneAccountRecordOne":                      "pg_stat_activity",
	"TestConcurrentAccountChangesChainInTheHistory":                "pg_stat_activity",
}

// The lane stays current: every test of this package is either in cockroachSuite or left out
// with its reason, never both, and every name left out is a test that exists. A new ledger
// test fails this until it is put in one of the two lists.
func TestTheCockroachLaneNamesEveryLedgerTest(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	declared := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		parsed, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range parsed.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && len(fn.Type.Params.List) == 1 {
				declared[fn.Name.Name] = true
			}
		}
	}
	require.Contains(t, declared, "TestCockroachDB", "the walk missed this package's tests")
	inSuite := map[string]bool{}
	for _, test := range cockroachSuite {
		name := "Test" + testName(test)
		require.False(t, inSuite[name], "%s is in cockroachSuite twice", name)
		inSuite[name] = true
		require.NotContains(t, cockroachLeftOut, name, "%s is both run on CockroachDB and left out", name)
	}
	for name := range cockroachLeftOut {
		require.True(t, declared[name], "cockroachLeftOut names %s, which is no test of this package", name)
	}
	for name := range declared {
		if !inSuite[name] && cockroachLeftOut[name] == "" {
			t.Errorf("%s is neither in cockroachSuite (pkg/ledger/crdb_test.go) nor in cockroachLeftOut with the reason: make test-crdb would not run it", name)
		}
	}
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
