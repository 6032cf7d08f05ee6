package outcome_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

func ask(t *testing.T, nc *nats.Conn, subject, body string) *nats.Msg {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 5*time.Second)
	require.NoError(t, err)
	return m
}

// What the service answers, for any NATS client: the outcome as JSON, or micro's error headers
// with a code; its INFO names the subject it listens on.
func TestTheServiceAnswersWithAnOutcomeOrACode(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: "a.b", Platform: "sim"}, ledger.Actor{Name: "test", Reason: "a test account"}))
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	key := w.Submit("a.b", "an account with a dot")[0]
	svc, err := outcome.Start(connect(t, w.NATSURL), w.Ledger, outcome.Config{})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)
	nc := connect(t, w.NATSURL)

	m := ask(t, nc, client.StatusSubject("a.b"), `{"delivery_key":"`+key.String()+`"}`)
	require.Empty(t, m.Header.Get(micro.ErrorCodeHeader))
	var o client.Outcome
	require.NoError(t, json.Unmarshal(m.Data, &o))
	require.Equal(t, atmosttype.Pending, o.State)
	require.Equal(t, "a.b", o.Account)

	for _, c := range []struct{ subject, body, code string }{
		{"atmost.status.a", `{"delivery_key":"` + key.String() + `"}`, client.CodeNotFound},
		{client.StatusSubject("acct-1"), `{"delivery_key":"` + key.String() + `"}`, client.CodeNotFound},
		{"atmost.status.~YWNjdC0x", `{"delivery_key":"` + key.String() + `"}`, client.CodeBadRequest}, // acct-1, escaped though it has a plain token
		{client.StatusSubject("a.b"), `{"delivery_key":"dk1:00"}`, client.CodeBadRequest},
		{client.StatusSubject("a.b"), `{"key":"` + key.String() + `"}`, client.CodeBadRequest},
		{client.StatusSubject("a.b"), `{"delivery_key":"` + key.String() + `"} {}`, client.CodeBadRequest},
		{client.StatusSubject("a.b"), ``, client.CodeBadRequest},
	} {
		m := ask(t, nc, c.subject, c.body)
		require.Equal(t, c.code, m.Header.Get(micro.ErrorCodeHeader), "%s %s", c.subject, c.body)
		require.NotEmpty(t, m.Header.Get(micro.ErrorHeader))
	}

	info := ask(t, nc, "$SRV.INFO."+client.StatusService, "")
	var i micro.Info
	require.NoError(t, json.Unmarshal(info.Data, &i))
	require.Len(t, i.Endpoints, 2)
	require.Equal(t, client.StatusSubjects, i.Endpoints[0].Subject)
	require.Equal(t, client.CancelSubjects, i.Endpoints[1].Subject)
	require.Equal(t, client.StatusVersion, i.Version)

	require.Equal(t, map[string]float64{"found": 1, "rejected": 0, "not_found": 2, "bad_request": 5, "unavailable": 0, "cancelled": 0, "too_late": 0}, answers(t, svc))
}

// answers reads atmost_status_requests_total by answer.
func answers(t *testing.T, svc *outcome.Service) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Collectors()...)
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// A ledger it cannot read is "ask again", never "not found": an intent that exists must not
// look refused.
func TestALedgerItCannotReadIsUnavailableNotNotFound(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	pool := dbtest.New(t).AppPool(t)
	l, err := ledger.New(pool, ledger.Config{Actor: "test"})
	require.NoError(t, err)
	pool.Close()
	svc, err := outcome.Start(connect(t, w.NATSURL), l, outcome.Config{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)
	env, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"acct-1","action":"post","request":{}}`))
	require.NoError(t, err)
	c, err := client.New(connect(t, w.NATSURL), client.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Status(ctx, "acct-1", env.DeliveryKey())
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrNotFound)
	require.Contains(t, err.Error(), client.CodeUnavailable)
	require.Equal(t, 1.0, answers(t, svc)["unavailable"])
}

// Stop waits for the answers being given and leaves nothing listening.
func TestStopLeavesNothingListening(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	svc, err := outcome.Start(connect(t, w.NATSURL), w.Ledger, outcome.Config{})
	require.NoError(t, err)
	svc.Stop()
	svc.Stop()
	_, err = connect(t, w.NATSURL).Request(client.StatusSubject("acct-1"), []byte(`{}`), time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// A producer that sent no Atmost-Delivery-Key header learns its key from the sequence JetStream
// acknowledged: the service reads the message and derives the key as ingest does, but only from
// a message on the asking account's own subject.
func TestASequenceAloneAnswersWithTheKeyOfTheAccountsOwnMessage(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim'), ('acct-2', 'sim')`)
	intents, err := w.JS.Stream(w.Ctx, events.IntentsStream)
	require.NoError(t, err)
	svc, err := outcome.Start(connect(t, w.NATSURL), w.Ledger, outcome.Config{Intents: intents})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)
	nc := connect(t, w.NATSURL)

	body := []byte(`{"v":1,"account":"acct-1","action":"post","request":{"text":"\ufeffno header\u0085"}}`)
	env, err := identity.ParseEnvelope(body)
	require.NoError(t, err)
	ack, err := w.JS.Publish(w.Ctx, events.IntentSubject("acct-1"), body)
	require.NoError(t, err)
	_, err = w.Ledger.Submit(w.Ctx, []identity.Envelope{env})
	require.NoError(t, err)
	seq := `{"seq":` + strconv.FormatUint(ack.Sequence, 10) + `}`

	m := ask(t, nc, client.StatusSubject("acct-1"), seq)
	require.Empty(t, m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader))
	var o client.Outcome
	require.NoError(t, json.Unmarshal(m.Data, &o))
	require.Equal(t, env.DeliveryKey(), o.Key)
	require.Equal(t, atmosttype.Pending, o.State)

	// The same sequence asked for as another account is not found: the message is acct-1's.
	m = ask(t, nc, client.StatusSubject("acct-2"), seq)
	require.Equal(t, client.CodeNotFound, m.Header.Get(micro.ErrorCodeHeader))
	m = ask(t, nc, client.StatusSubject("acct-1"), `{"seq":999999}`)
	require.Equal(t, client.CodeNotFound, m.Header.Get(micro.ErrorCodeHeader))

	// Nor does another account learn what is wrong with acct-1's message; acct-1 does.
	bad, err := w.JS.Publish(w.Ctx, events.IntentSubject("acct-1"), []byte(`not json`))
	require.NoError(t, err)
	badSeq := `{"seq":` + strconv.FormatUint(bad.Sequence, 10) + `}`
	m = ask(t, nc, client.StatusSubject("acct-2"), badSeq)
	require.Equal(t, client.CodeNotFound, m.Header.Get(micro.ErrorCodeHeader))
	require.NotContains(t, m.Header.Get(micro.ErrorHeader), "envelope")
	m = ask(t, nc, client.StatusSubject("acct-1"), badSeq)
	require.Equal(t, client.CodeNotFound, m.Header.Get(micro.ErrorCodeHeader))
	require.Contains(t, m.Header.Get(micro.ErrorHeader), "malformed_json")
}

// The cancel endpoint, through client.Cancel: an intent not yet authorized is parked cancelled
// (and a repeated cancel says so again); one past authorization is too late, with its state;
// another account's intent, asked for on this account's subject, is not found and untouched.
func TestCancelParksTheAccountsOwnIntentsOnly(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim'), ('acct-2', 'sim')`)
	keys := w.Submit("acct-1", "cancel me", "send me")
	svc, err := outcome.Start(connect(t, w.NATSURL), w.Ledger, outcome.Config{})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)
	c, err := client.New(connect(t, w.NATSURL), client.Config{})
	require.NoError(t, err)

	_, err = c.Cancel(w.Ctx, "acct-2", keys[0])
	require.ErrorIs(t, err, client.ErrNotFound, "another account's intent is not found")
	require.Equal(t, ledger.Pending, w.Intent(keys[0]).State)

	res, err := c.Cancel(w.Ctx, "acct-1", keys[0])
	require.NoError(t, err)
	require.Equal(t, client.CancelResult{Key: keys[0], Account: "acct-1", Cancelled: true, State: atmosttype.Parked, Reason: atmosttype.ReasonCancelled, Seq: 2}, res)
	again, err := c.Cancel(w.Ctx, "acct-1", keys[0])
	require.NoError(t, err)
	require.Equal(t, res, again, "a repeated cancel answers the same")
	require.Equal(t, 1, w.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'cancelled' AND actor = $2`, keys[0].Bytes(), outcome.CancelActor))

	claim, err := w.Ledger.Begin(w.Ctx, keys[1], [32]byte{1}, time.Minute)
	require.NoError(t, err)
	_, err = w.Ledger.Authorize(w.Ctx, claim, 2*time.Minute, "")
	require.NoError(t, err)
	late, err := c.Cancel(w.Ctx, "acct-1", keys[1])
	require.NoError(t, err)
	require.True(t, late.TooLate())
	require.Equal(t, atmosttype.Authorized, late.State)

	_, err = c.Cancel(w.Ctx, "acct-1", identity.DeliveryKey{})
	require.ErrorContains(t, err, client.CodeBadRequest)
	require.Equal(t, map[string]float64{"found": 0, "rejected": 0, "not_found": 1, "bad_request": 1, "unavailable": 0, "cancelled": 2, "too_late": 1}, answers(t, svc))
}
