package emaillane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/emaillane"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/email"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// laneIntents and laneDropRate are the end-to-end run's size and the share of submissions
// whose answer the proxy loses after Postfix queued the message.
const (
	laneIntents  = 500
	laneDropRate = 0.05
)

// sweepInterval is the lane's sweeper's pass. With 5 % of the answers lost, more than the
// policy's trip_unknowns intents can be indeterminate at once, which holds the account; as in a
// deployment, the sweeper heals it once the lookups have caught up.
const sweepInterval = 200 * time.Millisecond

var registry = platform.Registry{email.Name: email.Open}

// 500 intents go through ingest's ledger, the relay, the dispatcher, the reconciler and the sweeper to the
// real Postfix, through a proxy that loses the answer of 5 % of the submissions after the final
// dot reached Postfix and it queued the message (seeded). The reader's INBOX and the bot's
// Archive, read over IMAP, hold exactly one message per intent; every intent whose answer was
// lost went indeterminate, and its one lookup found the message (or it was parked); none was
// submitted twice.
func TestFiveHundredIntentsWithLostAnswersMakeNoDuplicateInTheMailbox(t *testing.T) {
	l := lane(t)
	proxy, err := emaillane.NewProxy(l, laneDropRate, 46)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)

	w := worldtest.New(t)
	acct := accountFor(t, l, proxy.Submission(), proxy.IMAP(), proxy.PEM, l.BotPassword)
	require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: acct.ID, Platform: acct.Platform, Settings: acct.Settings,
		CredentialRef: acct.CredentialRef, CredentialVersion: acct.CredentialVersion}, ledger.Actor{Name: "test", Reason: "the email lane's bot"}))
	unlimited := 0
	_, err = w.Ledger.SetPolicy(w.Ctx, acct.ID, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "the lane is not about the rate limit"})
	require.NoError(t, err)

	d, err := dispatch.New(w.Ctx, w.JS, w.Ledger, w.Relay, dispatch.Config{
		Platforms: registry, Batch: 16, Concurrency: 16,
		ClaimLease: ledger.MinLease, InFlightLease: 4 * ledger.MinLease,
		SendTimeout: 5 * time.Second, ReadBackTimeout: 8 * time.Second, Margin: time.Second,
		GateDelay: 200 * time.Millisecond, AckWait: 20 * time.Second,
	})
	require.NoError(t, err)
	w.Run(d.Run)
	rl, err := ledger.New(w.DB.AppPool(t), ledger.Config{Actor: "reconciler"})
	require.NoError(t, err)
	r, err := reconcile.New(w.Ctx, w.JS, rl, relay.New(rl, w.JS, relay.Config{}), reconcile.Config{
		Platforms: registry, Concurrency: 4, LookupTimeout: 10 * time.Second, ReadBackTimeout: 10 * time.Second,
		ScanInterval: 200 * time.Millisecond, RetryDelay: 200 * time.Millisecond, AckWait: 20 * time.Second,
	})
	require.NoError(t, err)
	w.Run(r.Run)
	w.Sweeper(sweepInterval)

	start := time.Now()
	keys := w.Submit(acct.ID, worldtest.Texts("atmost's email lane, message", laneIntents)...)
	intents := w.Settle(keys, 10*time.Minute, func(s ledger.State) bool { return s != ledger.Published && s != ledger.Parked })
	t.Logf("%d intents settled in %s; the proxy lost %d answers of %d messages", len(keys), time.Since(start).Round(time.Millisecond), proxy.Dropped(), proxy.Forwarded())
	w.T.Logf("the account was held %d times for unknown outcomes and healed by the sweeper", w.Count(`SELECT count(*) FROM control_history WHERE kind = 'health' AND reason = 'unknown_outcomes'`))

	// The servers' own record: the messages delivered to the reader, and the copies in the
	// bot's Archive, by the key they carry.
	count := func(box *emaillane.Box) map[string][]string {
		var byKey map[string][]string
		require.Eventually(t, func() bool {
			byKey = box.Keyed(t)
			n := 0
			for _, k := range keys {
				if len(byKey[k.String()]) > 0 {
					n++
				}
			}
			return n == len(keys)
		}, time.Minute, 200*time.Millisecond, "%s's %s never showed a message for every intent", box.User, box.Name)
		return byKey
	}
	reasons := map[ledger.Reason]int{}
	for _, k := range keys {
		reasons[intents[k].Reason]++
	}
	for _, box := range []*emaillane.Box{l.Inbox(), l.Archive()} {
		byKey := count(box)
		duplicates, messages := 0, 0
		for _, k := range keys {
			ids := byKey[k.String()]
			messages += len(ids)
			duplicates += len(ids) - 1
			require.Len(t, ids, 1, "intent %s: one message in %s's %s", k, box.User, box.Name)
			if in := intents[k]; in.State == ledger.Published {
				require.Equal(t, ids[0], in.ObjectID, "intent %s: the ledger names the message", k)
			}
		}
		t.Logf("%s's %s holds %d messages for %d intents: %d duplicates", box.User, box.Name, messages, len(keys), duplicates)
		require.Zero(t, duplicates)
	}
	t.Logf("reasons: %v", reasons)
	require.EqualValues(t, len(keys), proxy.Forwarded(), "one submission per intent reached Postfix: no resend")
	require.Positive(t, proxy.Dropped(), "the proxy lost some answers (seeded 5 %)")

	// Every lost answer made the intent indeterminate; its one lookup found the message, or the
	// intent was parked for a person.
	unknown := w.Count(`SELECT count(DISTINCT delivery_key) FROM history WHERE to_state = 'indeterminate'`)
	t.Logf("%d intents went indeterminate: %d send_unknown, %d readback_mismatch", unknown,
		w.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'send_unknown'`),
		w.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'readback_mismatch'`))
	require.GreaterOrEqual(t, unknown, int(proxy.Dropped()), "every lost answer is an unknown outcome")
	require.Equal(t, unknown, reasons[ledger.ReasonReconciledFound]+reasons[ledger.ReasonReconcileNotFound],
		"every unknown was found by its lookup or parked")
	require.Equal(t, len(keys)-unknown, reasons[ledger.ReasonPublished], "every other intent was published and read back")
	// An attempt a hold stopped before its authorization (evidence "held") sent nothing.
	require.Equal(t, len(keys), w.Count(`SELECT count(*) FROM history WHERE to_state = 'authorized'`), "one authorized attempt per intent")
	require.Equal(t, len(keys), w.Count(`SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM attempt_evidence e WHERE e.attempt_token = a.attempt_token AND e.reason = 'held')`), "one attempt per intent, apart from those a hold stopped")
	require.Equal(t, unknown, w.Count(`SELECT count(*) FROM reconciliations WHERE step = 'resolved'`), "one lookup per unknown")
}

// Postfix's own refusals before DATA prove nothing was sent: a wrong password (535 to AUTH)
// and a recipient it does not know (550 to RCPT) end NotSent, platform_rejected, and nothing
// reaches either mailbox.
func TestRefusalsBeforeDataOnPostfixAreNotSent(t *testing.T) {
	l := lane(t)
	for _, c := range []struct {
		name, password, to, step string
		reply                    int
	}{
		{"a wrong password", "not-the-password", l.Reader, email.StepAuth, 535},
		{"an unknown recipient", l.BotPassword, "nobody@atmost.test", email.StepRcpt, 550},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := accountFor(t, l, l.Submission, l.IMAP, nil, c.password)
			a.Settings = withRecipient(t, a.Settings, c.to)
			ad := open(t, a)
			req := platformtest.Post(t, account, "refused before DATA: "+c.name)
			p, err := ad.Prepare(req)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out := ad.Send(ctx, p)
			require.Equal(t, platform.NotSent, out.Result, "detail: %v", out.Detail)
			require.Equal(t, platform.ReasonPlatformRejected, out.Reason)
			require.Equal(t, c.step, out.Detail["step"])
			require.Equal(t, c.reply, out.Detail["reply"])
			require.NotContains(t, out.Detail["error"], l.BotPassword)
			id := email.MessageID(req.Key, "atmost.test")
			// A message submitted after it, and accepted, has landed: the refused one would be
			// there by then, had Postfix queued it.
			good := open(t, accountFor(t, l, l.Submission, l.IMAP, nil, l.BotPassword))
			after := platformtest.Post(t, account, "accepted after the refusal: "+c.name)
			p, err = good.Prepare(after)
			require.NoError(t, err)
			require.Equal(t, platform.Sent, good.Send(ctx, p).Result)
			l.Archive().WaitHolds(email.MessageID(after.Key, "atmost.test"))
			l.Inbox().WaitHolds(email.MessageID(after.Key, "atmost.test"))
			require.False(t, l.Archive().Holds(id), "the Archive holds a message Postfix refused")
			require.False(t, l.Inbox().Holds(id), "the reader holds a message Postfix refused")
		})
	}
}

// The lookup on the real servers: a message Postfix accepted is found by its Message-ID in the
// Archive; one never submitted is not found, and that proves nothing.
func TestLookupFindsAnAcceptedMessageAndNeverProvesNotSent(t *testing.T) {
	l := lane(t)
	ad := open(t, accountFor(t, l, l.Submission, l.IMAP, nil, l.BotPassword))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sent := platformtest.Post(t, account, "looked up after it was accepted")
	p, err := ad.Prepare(sent)
	require.NoError(t, err)
	out := ad.Send(ctx, p)
	require.Equal(t, platform.Sent, out.Result, "detail: %v", out.Detail)
	l.Archive().WaitHolds(out.ObjectID)
	lk := ad.Lookup(ctx, sent)
	require.Equal(t, platform.Found, lk.Result, "detail: %v", lk.Detail)
	require.Equal(t, out.ObjectID, lk.ObjectID)

	never := platformtest.Post(t, account, "never submitted")
	lk = ad.Lookup(ctx, never)
	require.Equal(t, platform.NotFound, lk.Result, "detail: %v", lk.Detail)
	require.False(t, lk.ProvenNotSent, "a copy not found proves nothing")
	require.False(t, ad.Capabilities().StatusLookup)
}
