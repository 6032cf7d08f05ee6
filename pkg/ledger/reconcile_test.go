package ledger_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

func (e *env) indeterminate(text string) ledger.Claim {
	e.t.Helper()
	c := e.authorized(text)
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Unknown})
	require.NoError(e.t, err)
	return c
}

// Reconciliation exactly once: 8 reconcilers race for the one lookup of each of several
// indeterminate intents; exactly one claims each, and a claim that never resolved (a crash
// after the claim) never yields a second.
func TestReconciliationIsClaimedExactlyOnceUnderConcurrentReconcilers(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		const intents, reconcilers = 5, 8
		var claims []ledger.Claim
		for i := 0; i < intents; i++ {
			claims = append(claims, e.indeterminate(fmt.Sprintf("unknown %d", i)))
		}
		var wg sync.WaitGroup
		won := make(chan ledger.Reconciliation, intents*reconcilers)
		start := make(chan struct{})
		for r := 0; r < reconcilers; r++ {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("reconciler-%d", r)})
			wg.Go(func() {
				<-start
				for _, c := range claims {
					rec, err := l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
					if err != nil {
						requireRefused(t, err, ledger.ErrAlreadyClaimed)
						continue
					}
					won <- rec
				}
			})
		}
		close(start)
		wg.Wait()
		close(won)
		perKey := map[string]int{}
		for rec := range won {
			perKey[rec.Key.String()]++
		}
		require.Len(t, perKey, intents)
		for key, n := range perKey {
			require.Equal(t, 1, n, "lookups claimed for %s", key)
		}
		// The claimer "crashes" before resolving: every later claim is still refused.
		_, err := e.l.ClaimReconciliation(e.ctx, claims[0].Key, newClaimToken())
		requireRefused(t, err, ledger.ErrAlreadyClaimed)
		require.Equal(t, intents, e.count(`SELECT count(*) FROM reconciliations WHERE step = 'claimed'`))
	})
}

func TestReconciliationResultsLeadWhereTheTableSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for result, want := range map[ledger.LookupResult]ledger.State{
		ledger.Found:         ledger.Published,
		ledger.ProvenNotSent: ledger.Failed,
		ledger.NotFound:      ledger.Parked,
		ledger.Unavailable:   ledger.Parked,
	} {
		c := e.indeterminate("reconcile " + string(result))
		r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
		require.NoError(t, err)
		require.Equal(t, c.Token, r.Token, "the lookup is for the attempt whose outcome is unknown")
		got, err := e.l.ResolveReconciliation(e.ctx, r, result, "obj-"+string(result), nil)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s", result)
		require.Equal(t, want, e.state(c.Key))

		// Another result for the same claim, or any result from another claim, is refused.
		other := ledger.Unavailable
		if result == ledger.Unavailable {
			other = ledger.NotFound
		}
		_, err = e.l.ResolveReconciliation(e.ctx, r, other, "", nil)
		requireRefused(t, err, ledger.ErrInvalidTransition)
		stranger := r
		stranger.Claim = newClaimToken()
		_, err = e.l.ResolveReconciliation(e.ctx, stranger, result, "obj-"+string(result), nil)
		requireRefused(t, err, ledger.ErrInvalidTransition)
	}
	require.Zero(t, e.count(`SELECT count(*) FROM text_claims WHERE delivery_key IN (SELECT delivery_key FROM intents WHERE state = 'failed')`),
		"a proven not-sent releases the text")
}

// A claim whose COMMIT went through but whose answer was lost (the connection cut during
// COMMIT) is the caller's own: asked again with the same token it is returned, so its lookup is
// made, once, instead of never. Any other token is still refused, and the ledger holds one claim.
func TestALostClaimAnswerIsReclaimedWithItsToken(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.indeterminate("claimed, and the answer lost")
		l := e.ledgerWith(ledger.Config{Actor: "reconciler"})
		lost := errors.New("commit: unexpected EOF (injected after the server committed)")
		loseFirstCommitAnswer(l, lost)
		token := newClaimToken()
		_, err := l.ClaimReconciliation(e.ctx, c.Key, token)
		require.ErrorIs(t, err, lost)
		require.Equal(t, 1, e.count(`SELECT count(*) FROM reconciliations WHERE step = 'claimed'`), "the claim committed")

		_, err = l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
		requireRefused(t, err, ledger.ErrAlreadyClaimed)
		r, err := l.ClaimReconciliation(e.ctx, c.Key, token)
		require.NoError(t, err, "the claim is the caller's own")
		require.True(t, r.Reclaimed)
		require.Equal(t, c.Token, r.Token)
		require.Equal(t, token, r.Claim)
		require.Equal(t, 1, e.count(`SELECT count(*) FROM reconciliations WHERE step = 'claimed'`), "still one claim")

		got, err := l.ResolveReconciliation(e.ctx, r, ledger.Found, "obj-reclaimed", nil)
		require.NoError(t, err)
		require.Equal(t, ledger.Published, got)
		// Resolved, the claim is no longer anyone's to take again.
		_, err = l.ClaimReconciliation(e.ctx, c.Key, token)
		requireRefused(t, err, ledger.ErrInvalidTransition)
	})
}

// A first claim is no reclaim, and a reclaim needs the token of the claim that committed.
func TestAFreshClaimIsNotAReclaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.indeterminate("claimed once")
	r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
	require.NoError(t, err)
	require.False(t, r.Reclaimed)
}

// The result's write whose answer was lost is asked again with the same claim and result: it
// answers the state the first write left, with no refusal (which the reconciler would report
// as a failure to record) and no second transition.
func TestARepeatedResolveAfterALostAnswerAnswersItsState(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.indeterminate("resolved, and the answer lost")
		l := e.ledgerWith(ledger.Config{Actor: "reconciler"})
		r, err := l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
		require.NoError(t, err)
		lost := errors.New("commit: connection reset by peer (injected after the server committed)")
		loseFirstCommitAnswer(l, lost)
		_, err = l.ResolveReconciliation(e.ctx, r, ledger.NotFound, "", nil)
		require.ErrorIs(t, err, lost)
		got, err := l.ResolveReconciliation(e.ctx, r, ledger.NotFound, "", nil)
		require.NoError(t, err)
		require.Equal(t, ledger.Parked, got)
		require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND from_state = 'indeterminate'`, c.Key.Bytes()))
	})
}

// Only the holder of the claim records the lookup's result: the ledger knows the claim by its
// token, so a write carrying another token is refused and changes nothing.
func TestOnlyTheClaimsHolderRecordsItsResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.indeterminate("one holder")
	r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
	require.NoError(t, err)
	stranger := r
	stranger.Claim = newClaimToken()
	_, err = e.l.ResolveReconciliation(e.ctx, stranger, ledger.Found, "obj-stranger", nil)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Indeterminate, e.state(c.Key))
	got, err := e.l.ResolveReconciliation(e.ctx, r, ledger.Found, "obj-holder", nil)
	require.NoError(t, err)
	require.Equal(t, ledger.Published, got)
}

func TestResolveWithoutAClaimedLookupIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.indeterminate("unclaimed")
	_, err := e.l.ResolveReconciliation(e.ctx, ledger.Reconciliation{Key: c.Key, Token: c.Token, Epoch: c.Epoch, Generation: c.Generation}, ledger.Found, "obj", nil)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Indeterminate, e.state(c.Key))
}

func TestClaimReconciliationOutsideIndeterminateIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("still in flight")
	_, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Zero(t, e.count(`SELECT count(*) FROM reconciliations`))
}

// A fenced-out worker's late success is evidence enough (after read-back): the intent is
// published without spending the lookup.
func TestLateEvidenceResolvesWithoutALookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("slow success")
	e.expireLease(c.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)

	requireRefused(t, e.l.ResolveFromEvidence(e.ctx, c.Key, "obj-other"), ledger.ErrInvalidTransition)
	require.NoError(t, e.l.ResolveFromEvidence(e.ctx, c.Key, "obj-late"))
	in := e.intent(c.Key)
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, ledger.ReasonEvidenceFound, in.Reason)
	require.Zero(t, e.count(`SELECT count(*) FROM reconciliations`), "no lookup was spent")
}

func TestParkIsRefusedWhileAnAuthorizedLeaseIsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("in flight")
	requireRefused(t, e.l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "stop it"}), ledger.ErrLeaseLive)
	require.Equal(t, ledger.Authorized, e.state(c.Key))
	e.expireLease(c.Key)
	require.NoError(t, e.l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "stop it"}))
	require.Equal(t, ledger.Parked, e.state(c.Key))
}

func TestOperatorResolutionNeedsEvidenceAndIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("for a human")
	require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "alice", Reason: "looks wrong"}))
	require.Error(t, e.l.Resolve(e.ctx, key, ledger.Published, "obj", ledger.Actor{Name: "alice", Reason: ""}))
	require.Error(t, e.l.Resolve(e.ctx, key, ledger.Pending, "", ledger.Actor{Name: "alice", Reason: "no"}))
	require.NoError(t, e.l.Resolve(e.ctx, key, ledger.Published, "obj-9", ledger.Actor{Name: "alice", Reason: "seen on the profile page"}))
	rec, err := e.l.Inspect(e.ctx, key)
	require.NoError(t, err)
	last := rec.Transitions[len(rec.Transitions)-1]
	require.Equal(t, ledger.Published, last.To)
	require.Equal(t, "alice", last.Actor)
	require.Contains(t, string(last.Detail), "seen on the profile page")
	require.Equal(t, "obj-9", rec.Intent.ObjectID)
	requireRefused(t, e.l.Resolve(e.ctx, key, ledger.Failed, "", ledger.Actor{Name: "alice", Reason: "changed my mind"}), ledger.ErrInvalidTransition)
}

func TestEpochBumpIsRecordedAndNewClaimsCarryIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	epoch, err := e.l.BumpEpoch(e.ctx, ledger.Actor{Name: "operator", Reason: "restored from backup"})
	require.NoError(t, err)
	require.Equal(t, int64(2), epoch)
	current, err := e.l.Epoch(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), current)
	c := e.claim("after the restore")
	require.Equal(t, int64(2), c.Epoch)
}

// A lookup that says not-sent never stands against a worker's reported success: the intent
// is parked for a human, its text is kept, and nothing can retry it.
func TestNotSentLookupAgainstReportedSuccessIsParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("sent after all")
	e.expireLease(c.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)

	r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
	require.NoError(t, err)
	state, err := e.l.ResolveReconciliation(e.ctx, r, ledger.ProvenNotSent, "", nil)
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, state)
	in := e.intent(c.Key)
	require.Equal(t, ledger.ReasonEvidenceConflict, in.Reason)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM text_claims WHERE delivery_key = $1`, c.Key.Bytes()), "the text stays claimed")
	requireRefused(t, e.l.Retry(e.ctx, c.Key), ledger.ErrInvalidTransition)
}

// Only a success the worker confirmed by read-back is evidence enough to publish.
func TestUnconfirmedSuccessIsNotEvidenceEnough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("unconfirmed")
	e.expireLease(c.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-u", Confirmed: false})
	requireRefused(t, err, ledger.ErrFenced)
	requireRefused(t, e.l.ResolveFromEvidence(e.ctx, c.Key, "obj-u"), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Indeterminate, e.state(c.Key))
}
