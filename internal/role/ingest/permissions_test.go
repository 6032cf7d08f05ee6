package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// producersDoc holds the NATS configuration that keeps each producer to its accounts.
const producersDoc = "../../../docs/producers.md"

// docBlock is the fenced block of docs/producers.md between the markers named marker, as the
// page shows it.
func docBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	b, err := os.ReadFile(producersDoc)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "<!-- "+marker+":start -->\n```"+lang+"\n")
	require.True(t, ok, "docs/producers.md has no %s block", marker)
	block, _, ok := strings.Cut(rest, "```\n<!-- "+marker+":end -->")
	require.True(t, ok, "docs/producers.md: the %s block does not end", marker)
	return block
}

// docNATSConfig is the nats-server configuration docs/producers.md shows, as it shows it, with
// the passwords it takes from the environment defined in front of it.
func docNATSConfig(t *testing.T, passwords map[string]string) string {
	t.Helper()
	config := docBlock(t, "nats-config", "text")
	var vars strings.Builder
	for name, password := range passwords {
		require.Contains(t, config, "$"+name)
		fmt.Fprintf(&vars, "%s: %q\n", name, password)
	}
	return vars.String() + config
}

// docConsumer is the consumer docs/producers.md has an operator create for producer-a, for the
// producer name with the account token.
func docConsumer(t *testing.T, name, token string) jetstream.ConsumerConfig {
	t.Helper()
	block := docBlock(t, "nats-consumer", "json")
	block = strings.ReplaceAll(strings.ReplaceAll(block, "producer-a", name), "acct-a", token)
	var cc jetstream.ConsumerConfig
	require.NoError(t, json.Unmarshal([]byte(block), &cc))
	return cc
}

// isolated is one producer connected as docs/producers.md has it connect, and everything its
// account received.
type isolated struct {
	name, account, other string
	nc                   *nats.Conn
	c                    *client.Client
	mu                   sync.Mutex
	received             []*nats.Msg
}

func (p *isolated) saw() []*nats.Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*nats.Msg(nil), p.received...)
}

// On a real nats-server configured exactly as docs/producers.md shows, with ingest, the relay
// and the outcome service in atmost's account and the consumers an operator creates, each of
// two producers publishes, learns the outcome of and follows its own account's intents with
// the client. Producer A then tries every way to make something land on B's intent subject or
// to read B's: a plain publish on it, a status request and a pull request with it as their reply
// subject, an acknowledgement asking for more with it as its reply, a push consumer delivering
// to it, and a subscription to everything. Nothing of A's reaches B's subject, no reject is
// B's, and A's account never sees B's intents or events. The same reply tricks aimed at A's own
// intent subject do land there (refused misdirected_reply): the checks would see them.
func TestProducersAreIsolatedByNATSAccounts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	passwords := map[string]string{"ATMOST_NATS_PASSWORD": "pw-atmost", "PRODUCER_A_PASSWORD": "pw-a", "PRODUCER_B_PASSWORD": "pw-b"}
	srv := natstest.NewWithConfig(t, docNATSConfig(t, passwords))

	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-a', 'sim'), ('acct-b', 'sim')`)
	require.NoError(t, err)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "ingest"})
	require.NoError(t, err)
	rjs := srv.Streams(t, nats.UserInfo("atmost", passwords["ATMOST_NATS_PASSWORD"]))
	in, err := ingest.New(ctx, rjs, l, ingest.Config{MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	svc, err := outcome.Start(rjs.Conn(), l, outcome.Config{})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)
	for _, name := range []string{"producer-a", "producer-b"} {
		token := "acct-" + strings.TrimPrefix(name, "producer-")
		_, err := rjs.CreateConsumer(ctx, events.EventsStream, docConsumer(t, name, token))
		require.NoError(t, err, "the operator creates %s's consumer", name)
	}
	// Ingest and the relay run all along, as the roles do.
	rel := relay.New(l, rjs, relay.Config{})
	ingesting := make(chan struct{})
	go func() {
		defer close(ingesting)
		for ctx.Err() == nil {
			if _, keys, err := in.BatchWritten(ctx); err == nil {
				_ = rel.PublishWritten(ctx, keys)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-ingesting })

	connect := func(name, account, other string) *isolated {
		p := &isolated{name: name, account: account, other: other}
		p.nc = srv.Connect(t, nats.UserInfo(name, passwords[strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"_PASSWORD"]))
		_, err := p.nc.Subscribe(">", func(m *nats.Msg) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.received = append(p.received, m)
		})
		require.NoError(t, err)
		require.NoError(t, p.nc.Flush())
		p.c, err = client.New(p.nc, client.Config{JetStreamAPI: "$JS.atmost.API", StatusTimeout: time.Second, PollInterval: 200 * time.Millisecond})
		require.NoError(t, err)
		return p
	}
	a := connect("producer-a", "acct-a", "acct-b")
	b := connect("producer-b", "acct-b", "acct-a")

	// The legitimate path: publish, learn the outcome, follow the events.
	receipts := map[*isolated]client.Receipt{}
	for _, p := range []*isolated{a, b} {
		r, err := p.c.Publish(ctx, client.Intent{Account: p.account, Action: "post", Request: map[string]any{"text": "the secret of " + p.name}})
		require.NoError(t, err, "%s publishes for its account", p.name)
		receipts[p] = r
		o, err := p.c.Await(ctx, p.account, r.Key, client.Seq(r.Seq), client.Until(func(o client.Outcome) bool { return o.State != "" }))
		require.NoError(t, err, "%s learns the outcome", p.name)
		require.Equal(t, atmosttype.Pending, o.State)

		got := make(chan events.Event, 1)
		fctx, stop := context.WithTimeout(ctx, 20*time.Second)
		err = p.c.Follow(fctx, client.FollowConfig{Durable: p.name, Bind: true}, func(_ context.Context, e events.Event) error {
			got <- e
			stop()
			return nil
		})
		stop()
		require.NoError(t, err, "%s follows its events", p.name)
		select {
		case e := <-got:
			require.Equal(t, r.Key, e.DeliveryKey, "%s: the creation of its intent", p.name)
		default:
			t.Fatalf("%s: Follow handed nothing over", p.name)
		}

		// Nothing answers but its own subscription to everything, which does not answer.
		_, err = p.c.Status(ctx, p.other, r.Key)
		require.Error(t, err, "%s asks about the other's account", p.name)
	}

	// A's tricks, each aimed at B's intent subject and, as the control, at A's own.
	otherSubject, ownSubject := events.IntentSubject("acct-b"), events.IntentSubject("acct-a")
	next := "$JS.atmost.API.CONSUMER.MSG.NEXT." + events.EventsStream + ".producer-a"
	// More events of A's for its pull requests to hand over.
	for i := range 3 {
		_, err := a.c.Publish(ctx, client.Intent{Account: "acct-a", Action: "post", Request: map[string]any{"text": fmt.Sprintf("more of a %d", i)}})
		require.NoError(t, err)
	}
	statusBody, err := json.Marshal(client.StatusRequest{Key: receipts[a].Key})
	require.NoError(t, err)
	for _, reply := range []string{otherSubject, ownSubject} {
		// The outcome service's answer and its error.
		require.NoError(t, a.nc.PublishRequest(client.StatusSubject("acct-a"), reply, statusBody))
		require.NoError(t, a.nc.PublishRequest(client.StatusSubject("acct-a"), reply, []byte("not a request")))
		// A pull request: events, heartbeats, its timeout.
		require.NoError(t, a.nc.PublishRequest(next, reply, []byte(`{"batch":10,"expires":600000000,"idle_heartbeat":100000000}`)))
		require.NoError(t, a.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+events.EventsStream+".producer-a", reply, []byte(`{"batch":10,"expires":600000000}`)))
		// An acknowledgement that asks for more.
		require.NoError(t, a.nc.PublishRequest("$JS.ACK."+events.EventsStream+".producer-a.1.1.1.1.0", reply, []byte(`+NXT {"batch":5}`)))
	}
	// A plain publish on B's subject, with and without JetStream's acknowledgement.
	envelopeB := `{"v":1,"account":"acct-b","action":"post","request":{"text":"forged for b"}}`
	require.NoError(t, a.nc.Publish(otherSubject, []byte(envelopeB)))
	// B's envelope on A's own subject: stored, and refused by ingest (subject_mismatch).
	ajs, err := jetstream.New(a.nc, jetstream.WithDefaultTimeout(5*time.Second))
	require.NoError(t, err)
	mismatched, err := ajs.Publish(ctx, ownSubject, []byte(envelopeB))
	require.NoError(t, err, "NATS cannot see the envelope's account")
	pubCtx, cancelPub := context.WithTimeout(ctx, 2*time.Second)
	_, err = a.c.Publish(pubCtx, client.Intent{Account: "acct-b", Action: "post", Request: map[string]any{"text": "forged for b"}})
	cancelPub()
	require.Error(t, err, "A publishes for B through the client")
	// A push consumer delivering to B's subject: its own durable made one, or a new one, under
	// every name of the API A might try.
	for _, name := range []string{"producer-a", "push-a"} {
		push, err := json.Marshal(map[string]any{"stream_name": events.EventsStream, "config": jetstream.ConsumerConfig{
			Durable: name, DeliverSubject: otherSubject, FilterSubject: "atmost.event.*.acct-a", AckPolicy: jetstream.AckExplicitPolicy}})
		require.NoError(t, err)
		for _, api := range []string{"$JS.atmost.API", "$JS.API"} {
			for _, subject := range []string{
				api + ".CONSUMER.CREATE." + events.EventsStream + "." + name + ".atmost.event.*.acct-a",
				api + ".CONSUMER.CREATE." + events.EventsStream + "." + name,
				api + ".CONSUMER.DURABLE.CREATE." + events.EventsStream + "." + name,
			} {
				if resp, err := a.nc.Request(subject, push, time.Second); err == nil {
					require.Contains(t, string(resp.Data), `"error"`, "%s created a consumer: %s", subject, resp.Data)
				}
			}
		}
	}
	cons, err := rjs.Consumer(ctx, events.EventsStream, "producer-a")
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Empty(t, info.Config.DeliverSubject, "producer-a's consumer is still a pull consumer")

	// The control: A's own subject took the answers to its tricks, and ingest refused them.
	intents, err := rjs.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rejects, err := l.Rejects(ctx, string(identity.ReasonMisdirectedReply), 100)
		return err == nil && len(rejects) >= 4
	}, 20*time.Second, 50*time.Millisecond, "the answers to A's tricks on its own subject, refused")
	// The tricks' last answers (the pull requests' timeouts) are due after 600 ms.
	time.Sleep(time.Second)

	// B's subject holds B's one intent, nothing else; no reject is on it.
	info2, err := intents.Info(ctx, jetstream.WithSubjectFilter(otherSubject))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{otherSubject: 1}, info2.State.Subjects, "what reached %s", otherSubject)
	var onB int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM rejects WHERE subject = $1`, otherSubject).Scan(&onB))
	require.Zero(t, onB, "rejects on %s", otherSubject)
	_, err = l.Get(ctx, mustKey(t, envelopeB))
	require.ErrorIs(t, err, ledger.ErrNotFound, "A's forged intent for B")
	mismatch, err := l.Rejects(ctx, string(identity.ReasonSubjectMismatch), 10)
	require.NoError(t, err)
	require.Len(t, mismatch, 1)
	require.Equal(t, int64(mismatched.Sequence), mismatch[0].StreamSeq, "B's envelope on A's subject")

	// A's account never saw B's intents or events; B's never saw A's.
	for _, p := range []*isolated{a, b} {
		for _, m := range p.saw() {
			require.NotContains(t, string(m.Data), "the secret of "+map[*isolated]string{a: b.name, b: a.name}[p], "%s saw %s", p.name, m.Subject)
			if strings.HasPrefix(m.Subject, "atmost.event.") {
				require.True(t, strings.HasSuffix(m.Subject, "."+identity.AccountToken(p.account)), "%s saw %s", p.name, m.Subject)
			}
		}
	}
}

func mustKey(t *testing.T, envelope string) identity.DeliveryKey {
	t.Helper()
	env, err := identity.ParseEnvelope([]byte(envelope))
	require.NoError(t, err)
	return env.DeliveryKey()
}
