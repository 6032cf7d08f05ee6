package ledger_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// textPair is two posts of one account with the same text, published one after the other as
// new occurrences: the original and its repeat. The occurrences are chosen so that the repeat's
// delivery key sorts before the original's, so that a claim handed out in key order would go to
// the repeat.
func textPair(t testing.TB, acct, text string) (original, repeat identity.Envelope) {
	t.Helper()
	for i := 0; ; i++ {
		original = envelopeWithOccurrence(t, acct, text, fmt.Sprintf("original-%d", i))
		repeat = envelopeWithOccurrence(t, acct, text, fmt.Sprintf("repeat-%d", i))
		if bytes.Compare(repeat.DeliveryKey().Bytes(), original.DeliveryKey().Bytes()) < 0 {
			return original, repeat
		}
	}
}

// store submits envelopes in one batch, in this order, and returns their keys.
func (e *env) store(envs ...identity.Envelope) []identity.DeliveryKey {
	e.t.Helper()
	res, err := e.l.Submit(e.ctx, envs)
	require.NoError(e.t, err)
	keys := make([]identity.DeliveryKey, len(res))
	for i, r := range res {
		require.Equal(e.t, ledger.Created, r.Outcome)
		keys[i] = r.Key
	}
	return keys
}

func (e *env) begin(key identity.DeliveryKey) ledger.Claim {
	e.t.Helper()
	c, err := e.l.Begin(e.ctx, key, requestHash(key.String()), lease)
	require.NoError(e.t, err)
	return c
}

// authorizeAll authorizes claims in one batch and returns each one's reason, by key.
func (e *env) authorizeAll(l *ledger.Ledger, claims ...ledger.Claim) map[identity.DeliveryKey]ledger.Reason {
	e.t.Helper()
	res, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
	require.NoError(e.t, err)
	out := map[identity.DeliveryKey]ledger.Reason{}
	for i, r := range res {
		require.NoError(e.t, r.Err)
		out[claims[i].Key] = r.Authorization.Reason
	}
	return out
}

// hold is the text hold that parked key, read back as intents show reads it.
func (e *env) hold(key identity.DeliveryKey) ledger.TextHold {
	e.t.Helper()
	rec, err := e.l.Inspect(e.ctx, key)
	require.NoError(e.t, err)
	h, ok := rec.TextHold()
	require.True(e.t, ok, "%s is %s (%s): no text hold", key, rec.Intent.State, rec.Intent.Reason)
	return h
}

// claimEnd is when the account's claim on key's text ends: its last_at plus the window.
func (e *env) claimEnd(holder identity.DeliveryKey) time.Time {
	e.t.Helper()
	var at time.Time
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT last_at FROM text_claims WHERE delivery_key = $1`, holder.Bytes()).Scan(&at))
	return at.Add(24 * time.Hour) // the default policy's window
}

func (e *env) addAccount(id string) {
	e.t.Helper()
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ($1, 'sim')`, id)
}

// Publishing a text, then the same text again as a new occurrence: the original is authorized,
// the repeat parked as its duplicate, whether ingest stored both in one batch or one after the
// other, and whatever order the dispatcher's batch holds them in. The repeat's detail names the
// original and the end of the window its authorization began.
func TestTheTextGoesToTheIntentStoredFirst(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		for name, storeBoth := range map[string]func(original, repeat identity.Envelope) (identity.DeliveryKey, identity.DeliveryKey){
			"one ingest batch": func(original, repeat identity.Envelope) (identity.DeliveryKey, identity.DeliveryKey) {
				keys := e.store(original, repeat)
				return keys[0], keys[1]
			},
			"one after the other": func(original, repeat identity.Envelope) (identity.DeliveryKey, identity.DeliveryKey) {
				return e.store(original)[0], e.store(repeat)[0]
			},
		} {
			original, repeat := storeBoth(textPair(t, account, "said once: "+name))
			got := e.authorizeAll(e.l, e.begin(repeat), e.begin(original))
			require.Equal(t, map[identity.DeliveryKey]ledger.Reason{original: ledger.ReasonAuthorized, repeat: ledger.ReasonDuplicateText}, got, name)
			h := e.hold(repeat)
			require.Equal(t, original, h.Holder, name)
			require.NotNil(t, h.WindowEndsAt, name)
			require.WithinDuration(t, e.claimEnd(original), *h.WindowEndsAt, 0, name)
			require.Equal(t, 24*time.Hour, h.Window, name)
		}
	})
}

// Across batches: an intent whose text an intent stored before it still waits to send is parked
// as its duplicate, naming it, with no window yet (it begins with the holder's authorization);
// the earlier one is authorized when its turn comes. Only an intent atmost will still try on
// its own waits: pending, or failed for a reason its policy retries, below the attempt cap, on
// its source's stored head, of the same account, and stored before.
func TestAnEarlierIntentThatWaitsKeepsItsText(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		type scene func(acct string, earlier identity.DeliveryKey) (resume func() ledger.Claim)
		// fail ends an attempt on the earlier intent as not sent, for reason.
		fail := func(key identity.DeliveryKey, reason ledger.Reason) {
			c := e.begin(key)
			require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, c)[key])
			res, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: reason})
			require.NoError(t, err)
			require.Equal(t, ledger.Failed, res.State)
		}
		retried := func(key identity.DeliveryKey) func() ledger.Claim {
			return func() ledger.Claim {
				require.NoError(t, e.l.Retry(e.ctx, key))
				return e.begin(key)
			}
		}
		waits := map[string]scene{
			"pending, never claimed": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				return func() ledger.Claim { return e.begin(k) }
			},
			"pending, claimed by another worker": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				c := e.begin(k)
				return func() ledger.Claim { return c }
			},
			"failed, account_disabled, which is always retried": func(acct string, k identity.DeliveryKey) func() ledger.Claim {
				e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, '{}', 'test')`, acct)
				// As Authorize leaves it when an operator disabled the account since Begin.
				fail(k, ledger.ReasonConnectionFailed)
				e.exec(`UPDATE intents SET reason = 'account_disabled' WHERE delivery_key = $1`, k.Bytes())
				return retried(k)
			},
			"failed, for a reason its policy retries": func(acct string, k identity.DeliveryKey) func() ledger.Claim {
				e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, '{platform_rejected}', 'test')`, acct)
				fail(k, ledger.ReasonPlatformRejected)
				return retried(k)
			},
		}
		for name, setup := range waits {
			acct := "waits " + name
			e.addAccount(acct)
			original, repeat := textPair(t, acct, "kept for the first")
			earlier := e.store(original)[0]
			resume := setup(acct, earlier)
			later := e.store(repeat)[0]
			require.Equal(t, ledger.ReasonDuplicateText, e.authorizeAll(e.l, e.begin(later))[later], name)
			h := e.hold(later)
			require.Equal(t, earlier, h.Holder, name)
			require.Nil(t, h.WindowEndsAt, "%s: the window begins with the holder's authorization", name)
			require.Equal(t, 24*time.Hour, h.Window, name)
			require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, resume())[earlier], "%s: the earlier intent's turn", name)
		}

		free := map[string]scene{
			"failed, for a reason its policy does not retry": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				fail(k, ledger.ReasonPlatformRejected)
				return nil
			},
			"failed at the attempt cap": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				fail(k, ledger.ReasonConnectionFailed)
				e.exec(`UPDATE intents SET attempts_authorized = 3 WHERE delivery_key = $1`, k.Bytes())
				return nil
			},
			"pending at the attempt cap": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				e.exec(`UPDATE intents SET attempts_authorized = 3 WHERE delivery_key = $1`, k.Bytes())
				return nil
			},
			"parked by an operator": func(_ string, k identity.DeliveryKey) func() ledger.Claim {
				require.NoError(t, e.l.Park(e.ctx, k, ledger.Actor{Name: "alice", Reason: "not this one"}))
				return nil
			},
			"pending on a superseded source": func(acct string, k identity.DeliveryKey) func() ledger.Claim {
				// The source's head moved on to another version after the intent was stored.
				e.exec(`INSERT INTO source_heads (source_id, head_version) VALUES ('src', decode(repeat('aa', 32), 'hex'))`)
				e.exec(`UPDATE intents SET source_id = 'src', source_version = decode(repeat('bb', 32), 'hex') WHERE delivery_key = $1`, k.Bytes())
				return nil
			},
		}
		for name, setup := range free {
			acct := "free " + name
			e.addAccount(acct)
			original, repeat := textPair(t, acct, "nobody waits for it")
			earlier := e.store(original)[0]
			setup(acct, earlier)
			later := e.store(repeat)[0]
			require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(later))[later], name)
		}

		// Not stored before, or not of the account: the text is the intent's own.
		e.addAccount("other")
		original, repeat := textPair(t, account, "the later one waits, not the earlier")
		keys := e.store(original, repeat)
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(keys[0]))[keys[0]], "the repeat stored after it does not hold it back")
		e.store(envelope(t, "other", "the same words elsewhere")) // stored first, and waits
		mine := e.store(envelope(t, account, "the same words elsewhere"))[0]
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(mine))[mine], "accounts never share a window")
	})
}

// A refusal takes no claim on its text: an intent the rate limit refused sent nothing, so once
// nothing will retry it, the next intent with the same text is authorized, not parked as the
// duplicate of a post that never happened.
func TestARateLimitedIntentTakesNoClaimOnItsText(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		e.setPolicy("rate_per_minute", 1)
		e.setPolicy("rate_burst", 1)
		// The account retries no rate limit: the refused intent does not wait for its text.
		e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, '{}', 'test')`, account)
		spent := e.store(envelope(t, account, "takes the only token"))[0]
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(spent))[spent])

		original, repeat := textPair(t, account, "said while the bucket was empty")
		refused := e.store(original)[0]
		require.Equal(t, ledger.ReasonRateLimited, e.authorizeAll(e.l, e.begin(refused))[refused])
		require.Zero(t, e.count(`SELECT count(*) FROM text_claims WHERE delivery_key = $1`, refused.Bytes()), "the refusal took the text")

		e.exec(`UPDATE rate_buckets SET tokens = 1, refilled_at = now() WHERE account_id = $1`, account)
		later := e.store(repeat)[0]
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(later))[later])
	})
}

// The rule never takes a claim back: an earlier intent that comes to authorization after a later
// one was authorized (it did not wait then: failed for a reason nothing retries, until an
// operator retried it) finds the text held and is parked, naming the holder and the end of its
// window.
func TestAClaimOnceTakenIsNeverTakenBack(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		original, repeat := textPair(t, account, "sent by whoever came first")
		earlier := e.store(original)[0]
		c := e.begin(earlier)
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, c)[earlier])
		_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected})
		require.NoError(t, err)
		later := e.store(repeat)[0]
		require.Equal(t, ledger.ReasonAuthorized, e.authorizeAll(e.l, e.begin(later))[later])

		require.NoError(t, e.l.RetryAs(e.ctx, earlier, ledger.Actor{Name: "alice", Reason: "the platform takes it now"}))
		require.Equal(t, ledger.ReasonDuplicateText, e.authorizeAll(e.l, e.begin(earlier))[earlier])
		h := e.hold(earlier)
		require.Equal(t, later, h.Holder)
		require.NotNil(t, h.WindowEndsAt)
		require.WithinDuration(t, e.claimEnd(later), *h.WindowEndsAt, 0)
		require.Equal(t, ledger.Authorized, e.state(later), "the holder keeps its authorization")
	})
}

// Two dispatchers race: one authorizes the originals of half the pairs and the repeats of the
// other half, the other the rest, in batches, at once. Whichever statement runs first, the
// repeat sees the original waiting (pending, in its snapshot) or holding the claim: every
// original is authorized, every repeat parked naming it.
func TestTheOriginalWinsTheTextWhenTwoDispatchersRace(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		const pairs, batch = 24, 4
		var originals, repeats []ledger.Claim
		for i := 0; i < pairs; i++ {
			original, repeat := textPair(t, account, fmt.Sprintf("raced text %d", i))
			var keys []identity.DeliveryKey
			if i%3 == 0 {
				keys = []identity.DeliveryKey{e.store(original)[0], e.store(repeat)[0]}
			} else {
				keys = e.store(original, repeat)
			}
			originals = append(originals, e.begin(keys[0]))
			repeats = append(repeats, e.begin(keys[1]))
		}
		var work [2][]ledger.Claim
		for i := 0; i < pairs; i++ {
			work[i%2] = append(work[i%2], originals[i])
			work[1-i%2] = append(work[1-i%2], repeats[i])
		}
		slices.Reverse(work[1])
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]map[identity.DeliveryKey]ledger.Reason, 2)
		for w := range work {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("dispatcher/%d", w)})
			wg.Go(func() {
				<-start
				results[w] = map[identity.DeliveryKey]ledger.Reason{}
				for claims := range slices.Chunk(work[w], batch) {
					res, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
					if !assertNoError(t, err) {
						return
					}
					for i, r := range res {
						assertNoError(t, r.Err)
						results[w][claims[i].Key] = r.Authorization.Reason
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for i := 0; i < pairs; i++ {
			o, r := originals[i].Key, repeats[i].Key
			require.Equal(t, ledger.ReasonAuthorized, results[i%2][o], "pair %d: the original", i)
			require.Equal(t, ledger.ReasonDuplicateText, results[1-i%2][r], "pair %d: the repeat", i)
			require.Equal(t, o, e.hold(r).Holder, "pair %d", i)
		}
		require.Equal(t, pairs, e.count(`SELECT count(*) FROM text_claims`))
		require.Equal(t, pairs, e.count(`SELECT count(*) FROM history WHERE reason = 'duplicate_text' AND actor LIKE 'dispatcher/_'`))
	})
}

// assertNoError reports err on t without stopping the goroutine's caller: require may not be
// called off the test's goroutine.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
