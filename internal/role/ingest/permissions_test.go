package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// producersDoc holds the NATS configuration that scopes each producer to its accounts.
const producersDoc = "../../../docs/producers.md"

// docNATSConfig is the nats-server configuration docs/producers.md shows, as it shows it, with
// the passwords it takes from the environment defined in front of it.
func docNATSConfig(t *testing.T, passwords map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(producersDoc)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "<!-- nats-config:start -->\n```text\n")
	require.True(t, ok, "docs/producers.md has no nats-config block")
	config, _, ok := strings.Cut(rest, "```\n<!-- nats-config:end -->")
	require.True(t, ok, "docs/producers.md: the nats-config block does not end")
	var vars strings.Builder
	for name, password := range passwords {
		require.Contains(t, config, "$"+name)
		fmt.Fprintf(&vars, "%s: %q\n", name, password)
	}
	return vars.String() + config
}

// producer is one producer's connection, as the configuration of docs/producers.md tells it to
// connect, and the permission errors the server sent it.
type producer struct {
	name, account, other string
	nc                   *nats.Conn
	js                   jetstream.JetStream
	denied               chan error
}

func (p *producer) envelope(account, text string) string {
	return fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
}

// refused requires the server to refuse this producer's publish on subject as a permissions
// violation naming it.
func (p *producer) refused(t *testing.T, subject string, data []byte) {
	t.Helper()
	require.NoError(t, p.nc.Publish(subject, data))
	select {
	case err := <-p.denied:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		require.Contains(t, err.Error(), fmt.Sprintf("Publish to %q", subject))
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: publishing on %s was not refused", p.name, subject)
	}
}

// The subject binds the account, and NATS permissions bind the subject: on a real nats-server
// configured as docs/producers.md shows, two producers, each allowed one account, can neither
// create an intent for the other's account nor read the other's events. An envelope for the
// other account on its own subject is refused by ingest (subject_mismatch); the other's subject
// is refused by the server; a consumer of the other's events, the other's replies and a forged
// event are refused by the server.
func TestAProducerCanActOnlyForItsOwnAccounts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	passwords := map[string]string{"ATMOST_NATS_PASSWORD": "pw-atmost", "PRODUCER_A_PASSWORD": "pw-a", "PRODUCER_B_PASSWORD": "pw-b"}
	srv := natstest.NewWithConfig(t, docNATSConfig(t, passwords))

	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-a', 'sim'), ('acct-b', 'sim')`)
	require.NoError(t, err)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "ingest"})
	require.NoError(t, err)
	rjs := srv.Streams(t, nats.UserInfo("atmost", passwords["ATMOST_NATS_PASSWORD"]))
	in, err := ingest.New(ctx, rjs, l, ingest.Config{MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)

	connect := func(name, password, account, other string) *producer {
		p := &producer{name: name, account: account, other: other, denied: make(chan error, 16)}
		p.nc = srv.Connect(t, nats.UserInfo(name, password), nats.CustomInboxPrefix("_INBOX_"+name),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				if errors.Is(err, nats.ErrPermissionViolation) {
					p.denied <- err
				}
			}))
		p.js, err = jetstream.New(p.nc)
		require.NoError(t, err)
		return p
	}
	a := connect("producer-a", passwords["PRODUCER_A_PASSWORD"], "acct-a", "acct-b")
	b := connect("producer-b", passwords["PRODUCER_B_PASSWORD"], "acct-b", "acct-a")

	mismatched := map[uint64]*producer{}
	for _, p := range []*producer{a, b} {
		ack, err := p.js.Publish(ctx, events.IntentSubject(p.account), []byte(p.envelope(p.account, "mine")))
		require.NoError(t, err, "%s publishes for its account", p.name)
		require.Equal(t, events.IntentsStream, ack.Stream)
		ack, err = p.js.Publish(ctx, events.IntentSubject(p.account), []byte(p.envelope(p.other, "theirs, on my subject")))
		require.NoError(t, err, "NATS cannot see the envelope's account")
		mismatched[ack.Sequence] = p
		p.refused(t, events.IntentSubject(p.other), []byte(p.envelope(p.other, "theirs, on their subject")))
		p.refused(t, events.EventSubject("published", p.account), []byte(`{}`))
	}
	intents, err := rjs.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	info, err := intents.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.State.Msgs, "what NATS refused never reached the stream")

	rel := relay.New(l, rjs, relay.Config{})
	var total ingest.Stats
	for range 20 {
		s, keys, err := in.BatchWritten(ctx)
		require.NoError(t, err)
		require.NoError(t, rel.PublishWritten(ctx, keys))
		if s == (ingest.Stats{}) {
			break
		}
		total.Created += s.Created
		total.Rejected += s.Rejected
	}
	require.Equal(t, ingest.Stats{Created: 2, Rejected: 2}, total)

	rejects, err := l.Rejects(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, rejects, 2)
	for _, r := range rejects {
		p, ok := mismatched[uint64(r.StreamSeq)]
		require.True(t, ok, "seq %d", r.StreamSeq)
		require.Equal(t, string(identity.ReasonSubjectMismatch), r.Reason, "%s named %s on its own subject", p.name, p.other)
	}
	for _, p := range []*producer{a, b} {
		for text, want := range map[string]bool{"mine": true, "theirs, on my subject": false, "theirs, on their subject": false} {
			account := p.account
			if !want {
				account = p.other
			}
			env, err := identity.ParseEnvelope([]byte(p.envelope(account, text)))
			require.NoError(t, err)
			_, err = l.Get(ctx, env.DeliveryKey())
			require.Equal(t, want, err == nil, "%s: an intent for %s (%q)", p.name, account, text)
		}
	}

	for _, p := range []*producer{a, b} {
		// Its own account's events, through the durable consumer of its name.
		cons, err := p.js.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
			Durable: p.name, FilterSubject: "atmost.event.*." + identity.AccountToken(p.account), AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err, "%s follows its account's events", p.name)
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			ev, err := events.Unmarshal(m.Data())
			require.NoError(t, err)
			require.Equal(t, p.account, ev.Account)
			require.NoError(t, m.Ack())
			n++
		}
		require.NoError(t, batch.Error())
		require.Equal(t, 1, n, "%s: the creation of its one intent", p.name)

		// Never the other account's, under its own name or another.
		for _, c := range []jetstream.ConsumerConfig{
			{Durable: p.name, FilterSubject: "atmost.event.*." + identity.AccountToken(p.other)},
			{Durable: p.name, FilterSubject: "atmost.event.>"},
			{Durable: "reconciler", FilterSubject: "atmost.event.*." + identity.AccountToken(p.account)},
		} {
			short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := p.js.CreateOrUpdateConsumer(short, events.EventsStream, c)
			cancelShort()
			require.Error(t, err, "%s creates %s on %s", p.name, c.Durable, c.FilterSubject)
			select {
			case err := <-p.denied:
				require.ErrorIs(t, err, nats.ErrPermissionViolation)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: creating %s on %s was not refused by the server", p.name, c.Durable, c.FilterSubject)
			}
		}
	}

	// Nor the other's replies: its inbox prefix is its own.
	sub, err := a.nc.SubscribeSync("_INBOX_producer-b.>")
	require.NoError(t, err)
	require.NoError(t, a.nc.Flush())
	select {
	case err := <-a.denied:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		require.Contains(t, err.Error(), "Subscription to")
	case <-time.After(5 * time.Second):
		t.Fatal("producer-a subscribed to producer-b's inbox")
	}
	_ = sub.Unsubscribe()
}
