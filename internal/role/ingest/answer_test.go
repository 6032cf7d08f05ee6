package ingest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// A request that names an intent subject as its reply makes the server or a service answer on
// it: a service's error, a pull request's heartbeats and its timeout. Each answer is stored in
// ATMOST_INTENTS like any message, and ingest refuses it as what it is, misdirected_reply, never
// as the malformed JSON its body would be taken for, whatever the body (here an envelope); the
// intent behind them goes through.
func TestAnAnswerOnAnIntentSubjectIsAMisdirectedReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subj := events.IntentSubject("acct-1")
	nc := e.JS.Conn()

	svc, err := micro.AddService(nc, micro.Config{Name: "refuser", Version: "1.0.0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	require.NoError(t, svc.AddEndpoint("refuse", micro.HandlerFunc(func(r micro.Request) {
		_ = r.Error("404", "not found", []byte(post("the body of an error")))
	}), micro.WithEndpointSubject("test.refuse")))
	require.NoError(t, nc.Flush())
	_, err = e.JS.CreateOrUpdateConsumer(e.Ctx, events.EventsStream, jetstream.ConsumerConfig{Durable: "idle", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	require.NoError(t, nc.PublishRequest("test.refuse", subj, nil))
	// Heartbeats every 100 ms, then the timeout after 500 ms.
	require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+events.EventsStream+".idle", subj,
		[]byte(`{"batch":1,"expires":500000000,"idle_heartbeat":100000000}`)))
	intents, err := e.JS.Stream(e.Ctx, events.IntentsStream)
	require.NoError(t, err)
	var answers uint64
	require.Eventually(t, func() bool {
		info, err := intents.Info(e.Ctx)
		if err != nil {
			return false
		}
		last, err := intents.GetLastMsgForSubject(e.Ctx, subj)
		answers = info.State.Msgs
		// The timeout is the request's last answer.
		return err == nil && last.Header.Get("Nats-Pending-Messages") != "" && answers >= 3
	}, 5*time.Second, 10*time.Millisecond, "the service's error, heartbeats and the timeout stored on %s", subj)
	// A heartbeat may still land beside the timeout: count the answers once no more come.
	require.Eventually(t, func() bool {
		time.Sleep(300 * time.Millisecond)
		info, err := intents.Info(e.Ctx)
		if err != nil {
			return false
		}
		settled := info.State.Msgs == answers
		answers = info.State.Msgs
		return settled
	}, 5*time.Second, time.Millisecond, "answers still arriving on %s", subj)
	e.publish("acct-1", post("behind them"), nats.Header{})

	require.Equal(t, ingest.Stats{Created: 1, Rejected: int(answers)}, e.drain())
	rejects := e.rejectsBySeq()
	require.Len(t, rejects, int(answers))
	for seq, r := range rejects {
		require.Equal(t, string(identity.ReasonMisdirectedReply), r.Reason, "seq %d: %v", seq, r.Headers)
	}
	// A replay, which parses the stored headers again, refuses each again for the same reason.
	for _, r := range rejects {
		_, refusal := ingest.Parse(r.Subject, nats.Header(r.Headers), nil)
		require.NotNil(t, refusal)
		require.Equal(t, identity.ReasonMisdirectedReply, refusal.Reason)
	}
}
