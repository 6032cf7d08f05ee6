package ingest_test

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/migrations"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// hostile is one message a producer may send, and what ingest must make of it.
type hostile struct {
	name    string
	subject string
	header  []byte // a raw header block; nil: none
	body    string
	want    identity.Reason // "" for an intent
}

// rejectsBySeq reads every stored rejection, by stream sequence.
func (e *env) rejectsBySeq() map[int64]ledger.StoredRejection {
	e.T.Helper()
	all, err := e.Ledger.Rejects(e.Ctx, "", 1000)
	require.NoError(e.T, err)
	out := map[int64]ledger.StoredRejection{}
	for _, r := range all {
		out[r.StreamSeq] = r
	}
	return out
}

// settled waits until ingest's consumer has nothing pending and nothing unacknowledged:
// ingest's acknowledgements are not confirmed, so the server may count them a moment after a
// batch returned.
func (e *env) settled() {
	e.T.Helper()
	require.Eventually(e.T, func() bool {
		info := e.consumerInfo()
		return info.NumPending == 0 && info.NumAckPending == 0
	}, 5*time.Second, 10*time.Millisecond, "every message acknowledged")
}

func (e *env) consumerInfo() *jetstream.ConsumerInfo {
	e.T.Helper()
	c, err := e.JS.Consumer(e.Ctx, events.IntentsStream, "ingest")
	require.NoError(e.T, err)
	info, err := c.Info(e.Ctx)
	require.NoError(e.T, err)
	return info
}

// Every value of a message that reaches PostgreSQL (subject, header keys and values, body,
// and through the envelope the intent's fields) with the bytes PostgreSQL refuses or the sizes
// a producer can reach: all of them, and the innocent messages beside them, are stored in one
// batch on their first delivery, each as what it is, and acknowledged. A refused message's
// subject and headers read back as the bytes that came.
func TestHostileValuesAreStoredOnTheirFirstDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subj := events.IntentSubject("acct-1")
	// 10,000 distinct headers within the 64 KiB JetStream takes: three-letter keys, empty values.
	manyHeaders := make([]string, 10000)
	for i := range manyHeaders {
		manyHeaders[i] = fmt.Sprintf("%03s:", strconv.FormatInt(int64(i), 36))
	}
	cases := []hostile{
		{"innocent intent", subj, nil, post("innocent"), ""},
		{"innocent reject", subj, nil, `{"v":1,`, identity.ReasonMalformedJSON},
		{"NUL in a header value", subj, headerBlock("K: a\x00b"), "bad", identity.ReasonMalformedJSON},
		{"NUL in a header key", subj, headerBlock("K\x00ey: v"), "bad", identity.ReasonMalformedJSON},
		{"invalid UTF-8 in a header key and value", subj, headerBlock("K\xff: v\xfe\xff"), "bad", identity.ReasonMalformedJSON},
		{"a header value that looks stored", subj, headerBlock("K: base64:AAAA"), "bad", identity.ReasonMalformedJSON},
		{"10,000 headers", subj, headerBlock(manyHeaders...), "bad", identity.ReasonMalformedJSON},
		{"the largest header block JetStream takes", subj, headerBlock("Big: " + strings.Repeat("b", 64<<10-32)), "bad", identity.ReasonMalformedJSON},
		{"NUL in the subject", "atmost.intent.a\x00b", nil, "bad", identity.ReasonMalformedJSON},
		{"invalid UTF-8 in the subject", "atmost.intent.\xff\xfe", nil, "bad", identity.ReasonMalformedJSON},
		{"NUL in a header of a valid intent", subj, headerBlock("Trace: \x00"), post("with a NUL header"), ""},
		{"an escaped NUL in the request", subj, nil, `{"v":1,"account":"acct-1","action":"post","request":{"text":"a\u0000b","k\u0000":"\u0000"}}`, ""},
		{"an escaped NUL in the target", subj, nil, `{"v":1,"account":"acct-1","action":"post","target":"a\u0000b","request":{}}`, identity.ReasonInvalidTarget},
		{"an escaped NUL in the source id", subj, nil, `{"v":1,"account":"acct-1","action":"post","request":{},"source":{"id":"a\u0000b","version":"sv1:` + strings.Repeat("1", 64) + `"}}`, identity.ReasonInvalidSource},
		{"an escaped NUL in the account", subj, nil, `{"v":1,"account":"a\u0000","action":"post","request":{}}`, identity.ReasonInvalidAccount},
		{"invalid UTF-8 in the body", subj, nil, "\xff\x00", identity.ReasonInvalidUTF8},
		{"a header block that does not parse", subj, []byte("garbage\r\n\r\n"), post("garbage header"), identity.ReasonInvalidHeader},
	}
	// The longest subject the server takes: its control line (4096 bytes) holds the subject,
	// the reply and the size. Found on a subject of the same length that no stream takes (no
	// responders, where a line too long is a protocol error).
	prod := newRawProducer(t, e.NATSURL)
	tail := strings.Repeat("s", 4096-len("atmost.intent.  3")-len(prod.inbox)-16)
	for !strings.HasPrefix(prod.publish(t, "atmost.probes."+tail+"s", nil, []byte("bad")).Refusal, "-ERR") {
		tail += "s"
	}
	long := "atmost.intent." + tail
	require.Greater(t, len(long), 4000)
	require.Contains(t, prod.publish(t, long+"s", nil, []byte("bad")).Refusal, "-ERR", "one byte longer is refused")
	cases = append(cases, hostile{"a subject of maximal length", long, nil, "bad", identity.ReasonMalformedJSON})

	seqs := map[uint64]hostile{}
	for _, c := range cases {
		p := prod.publish(t, c.subject, c.header, []byte(c.body))
		require.Empty(t, p.Refusal, c.name)
		seqs[p.Seq] = c
	}
	// A 1 MiB header never reaches ingest: JetStream refuses it and the producer is told.
	require.Contains(t, prod.publish(t, subj, headerBlock("Big: "+strings.Repeat("b", 1<<20-64)), []byte("x")).Refusal, "header size exceeds")

	s, err := e.in.Batch(e.Ctx)
	require.NoError(t, err)
	var intents, rejects int
	for _, c := range cases {
		if c.want == "" {
			intents++
		} else {
			rejects++
		}
	}
	require.Equal(t, ingest.Stats{Created: intents, Rejected: rejects}, s, "every message settled on its first delivery")
	e.settled()

	stored := e.rejectsBySeq()
	require.Len(t, stored, rejects)
	published := e.publishedRejects()
	require.Len(t, published, rejects)
	for seq, c := range seqs {
		if c.want == "" {
			continue
		}
		r, ok := stored[int64(seq)]
		require.True(t, ok, c.name)
		require.Equal(t, string(c.want), r.Reason, c.name)
		require.Equal(t, c.subject, r.Subject, "%s: the subject as it came", c.name)
		sum := sha256.Sum256([]byte(c.body))
		require.Equal(t, sum[:], r.SHA256, c.name)
		if c.header != nil && c.want != identity.ReasonInvalidHeader {
			want, err := nats.DecodeHeadersMsg(c.header)
			require.NoError(t, err)
			require.Equal(t, map[string][]string(want), r.Headers, "%s: the headers as they came", c.name)
		}
		p, ok := published[seq]
		require.True(t, ok, "%s: published", c.name)
		require.Equal(t, c.subject, ledger.ParseStoredText(p.Subject), "%s: the subject as it came, on the stream too", c.name)
	}
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM intents`))
}

// jetstream's Fetch takes a producer's Status header on an empty message for the server's
// status (100: skipped and never acknowledged; 404, 408: the fetch ends, and the batch behind
// it waits out its ack wait on every redelivery) and a producer's Nats-Pin-Id for its pin
// (after which the server refuses every pull request). Ingest reads only the server's word as
// the server's: each such message is a reject, the messages behind it go through, all in one
// batch.
func TestAProducersStatusOrPinHeaderIsNotTheServers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prod := newRawProducer(t, e.NATSURL)
	subj := events.IntentSubject("acct-1")
	headers := [][]byte{
		headerBlock("Status: 100"),
		headerBlock("Status: 404"),
		headerBlock("Status: 408", "Description: Request Timeout"),
		headerBlock("Status: 409", "Description: Consumer Deleted"),
		[]byte("NATS/1.0 404 No Messages\r\n\r\n"),
		headerBlock("Nats-Pin-Id: pinned"),
	}
	for _, h := range headers {
		require.Empty(t, prod.publish(t, subj, h, nil).Refusal)
	}
	require.Empty(t, prod.publish(t, subj, nil, []byte(post("behind them"))).Refusal)

	s, err := e.in.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Created: 1, Rejected: len(headers)}, s)
	s, err = e.in.Batch(e.Ctx)
	require.NoError(t, err, "the next pull request is not refused")
	require.Equal(t, ingest.Stats{}, s)
	e.settled()
	require.Equal(t, len(headers), e.Count(`SELECT count(*) FROM rejects WHERE raw_size = 0`))
	require.Equal(t, 4, e.Count(`SELECT count(*) FROM rejects WHERE headers ? 'Status'`), "a producer's Status header, stored as it came")
	require.Equal(t, 4, e.Count(`SELECT count(*) FROM rejects WHERE reason = 'misdirected_reply'`), "a Status header is refused as an answer, whoever wrote it (JetStream stores a status line as no header)")
}

// poison makes the test's database refuse what holds the word "poison", as an intent (in its
// request) and as a reject (in its body): data PostgreSQL will not take, whatever ingest does.
func (e *env) poison() {
	e.Exec(`ALTER TABLE intents ADD CONSTRAINT poison CHECK (request NOT LIKE '%poison%')`)
	e.Exec(`ALTER TABLE rejects ADD CONSTRAINT poison CHECK (position('poison'::BYTEA IN raw) = 0)`)
}

// The database refuses a message: the rest of its batch (intents and rejects) is stored and
// acknowledged at once, the refused one alone is nak'ed, and on its MaxDeliveries-th delivery
// it is recorded as unstorable (its stream, sequence, size and SHA-256; none of its bytes),
// published on atmost.rejected.unstorable, and acknowledged.
func TestAMessageTheDatabaseRefusesEndsUnstorableAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.poison()
	in, err := ingest.New(e.Ctx, e.JS, e.Ledger, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 50 * time.Millisecond, MaxDeliveries: 3})
	require.NoError(t, err)
	e.publish("acct-1", post("innocent one"), nil)
	e.publish("acct-1", post("poison"), nil)
	e.publish("acct-1", "not json", nil)
	e.publish("acct-1", "poison, not json", nil)
	e.publish("acct-1", post("innocent two"), nil)

	s, err := in.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Created: 2, Rejected: 1, Retried: 2}, s, "only the refused two are held back")
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects`))

	deliveries := 1
	var total ingest.Stats
	for range 20 {
		if total.Unstorable == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond) // past the nak delay
		s, err := in.Batch(e.Ctx)
		require.NoError(t, err)
		if s != (ingest.Stats{}) {
			deliveries++
		}
		total.Unstorable += s.Unstorable
		total.Created += s.Created
		total.Rejected += s.Rejected
	}
	require.Equal(t, ingest.Stats{Unstorable: 2}, total)
	require.Equal(t, 3, deliveries, "recorded on the third delivery, not before")
	e.settled()

	rows, err := e.Ledger.Rejects(e.Ctx, string(identity.ReasonUnstorable), 10)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	stream, err := e.JS.Stream(e.Ctx, events.RejectsStream)
	require.NoError(t, err)
	published := e.publishedRejects()
	bodies := map[int64]string{2: post("poison"), 4: "poison, not json"}
	for _, r := range rows {
		body, ok := bodies[r.StreamSeq]
		require.True(t, ok, "seq %d", r.StreamSeq)
		require.Equal(t, events.IntentsStream, r.Stream)
		require.Equal(t, len(body), r.Size)
		require.Empty(t, r.Preview, "none of its bytes")
		require.Empty(t, r.Subject)
		require.Empty(t, r.Headers)
		sum := sha256.Sum256([]byte(body))
		require.Equal(t, sum[:], r.SHA256)
		require.Contains(t, r.Detail, "on 3 deliveries")
		require.Contains(t, r.Detail, "23514", "the refusal, in ASCII")
		m := publishedReject(t, stream, r.StreamSeq)
		require.Equal(t, fmt.Sprintf("%x", sum), m.Header.Get("Atmost-Sha256"))
		require.Equal(t, fmt.Sprint(len(body)), m.Header.Get("Atmost-Size"))
		p := published[uint64(r.StreamSeq)]
		require.Empty(t, p.Raw, "none of its bytes")
		require.True(t, p.Truncated)
		require.Equal(t, len(body), p.Size)
		require.Equal(t, fmt.Sprintf("%x", sum), p.SHA256)
		require.Equal(t, events.IntentSubject("acct-1"), p.Subject, "how its producer finds it, though the ledger keeps no subject")
	}
}

// publishedReject is the ATMOST_REJECTS message published for the intent stream's seq.
func publishedReject(t *testing.T, stream jetstream.Stream, seq int64) *jetstream.RawStreamMsg {
	t.Helper()
	info, err := stream.Info(t.Context())
	require.NoError(t, err)
	for s := info.State.FirstSeq; s <= info.State.LastSeq; s++ {
		m, err := stream.GetMsg(t.Context(), s)
		require.NoError(t, err)
		if m.Header.Get(jetstream.MsgIDHeader) == fmt.Sprintf("reject:%s:%d", events.IntentsStream, seq) {
			return m
		}
	}
	t.Fatalf("no reject published for seq %d", seq)
	return nil
}

// The record of an unstorable message is the one thing acknowledged without the message's
// content; when even it cannot be stored, the message is not acknowledged: it stays on the
// stream and is recorded once the record can be.
func TestAnUnstorableMessageIsNeverAcknowledgedUnrecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.poison()
	e.Exec(`ALTER TABLE rejects ADD CONSTRAINT no_record CHECK (reason <> 'unstorable')`)
	in, err := ingest.New(e.Ctx, e.JS, e.Ledger, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 10 * time.Millisecond, MaxDeliveries: 1})
	require.NoError(t, err)
	e.publish("acct-1", post("poison"), nil)
	for range 3 {
		s, err := in.Batch(e.Ctx)
		require.NoError(t, err)
		require.Equal(t, ingest.Stats{Retried: 1}, s)
		time.Sleep(50 * time.Millisecond)
	}
	require.Zero(t, e.Count(`SELECT count(*) FROM rejects`))
	require.Equal(t, 1, e.consumerInfo().NumAckPending+int(e.consumerInfo().NumPending), "still on the stream")

	e.Exec(`ALTER TABLE rejects DROP CONSTRAINT no_record`)
	s, err := in.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Unstorable: 1}, s)
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects WHERE reason = 'unstorable'`))
}

// An outage is not a refusal: however many deliveries a message spends while the database is
// unreachable, it is stored as what it is once the database is back, never recorded as
// unstorable; and the server never stops delivering it on its own (the consumer has no
// MaxDeliver), which would drop it without a word.
func TestAnOutageNeverCountsTowardTheDeliveryBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("acct-1", post("through the outage"), nil)
	e.publish("acct-1", "bad through the outage", nil)
	broken := brokenLedger(t, e)
	down, err := ingest.New(e.Ctx, e.JS, broken, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 10 * time.Millisecond, MaxDeliveries: 2})
	require.NoError(t, err)
	for range 4 {
		s, err := down.Batch(e.Ctx)
		require.Error(t, err)
		require.Equal(t, 2, s.Retried)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, -1, e.consumerInfo().Config.MaxDeliver)

	up, err := ingest.New(e.Ctx, e.JS, e.Ledger, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 10 * time.Millisecond, MaxDeliveries: 2})
	require.NoError(t, err)
	s, err := up.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Created: 1, Rejected: 1}, s)
	require.Zero(t, e.Count(`SELECT count(*) FROM rejects WHERE reason = 'unstorable'`))

	// Nor is a refusal that is not about the message: a grant missing while the rejects table
	// would take a record.
	e.Exec(`REVOKE INSERT ON intents FROM ` + migrations.AppRole)
	e.publish("acct-1", post("while the grant is missing"), nil)
	for range 4 {
		s, err := up.Batch(e.Ctx)
		require.Error(t, err)
		require.Equal(t, ingest.Stats{Retried: 1}, s)
		time.Sleep(50 * time.Millisecond)
	}
	e.Exec(`GRANT INSERT ON intents TO ` + migrations.AppRole)
	s, err = up.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Created: 1}, s)
	require.Zero(t, e.Count(`SELECT count(*) FROM rejects WHERE reason = 'unstorable'`))
}

// brokenLedger is a ledger whose database is gone.
func brokenLedger(t *testing.T, e *env) *ledger.Ledger {
	t.Helper()
	down := mustPool(t, e.DB.URL)
	down.Close()
	l, err := ledger.New(down, ledger.Config{MaxRetries: 1})
	require.NoError(t, err)
	return l
}

// A stored reject is acknowledged only once it is on atmost.rejected.<reason> as well: when
// publishing fails, the batch's intents are acknowledged and its rejects (unknown_account too,
// decided after the intents' commit) come back, to be stored once and published.
func TestARejectIsAcknowledgedOnlyOncePublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in, err := ingest.New(e.Ctx, e.JS, e.Ledger, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 10 * time.Millisecond})
	require.NoError(t, err)
	e.publish("acct-1", post("kept"), nil)
	e.publish("nobody", `{"v":1,"account":"nobody","action":"post","request":{}}`, nil)
	e.publish("acct-1", "not json", nil)
	require.NoError(t, e.JS.DeleteStream(e.Ctx, events.RejectsStream))

	s, err := in.Batch(e.Ctx)
	require.Error(t, err)
	require.Equal(t, ingest.Stats{Created: 1, Retried: 2}, s)
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM rejects`), "stored, not yet published")

	require.NoError(t, streams.Ensure(e.Ctx, e.JS.Conn(), e.JS, streams.Config{}))
	time.Sleep(50 * time.Millisecond)
	s, err = in.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, ingest.Stats{Rejected: 2}, s)
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM rejects`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects WHERE reason = 'unknown_account'`))
	e.settled()
}
