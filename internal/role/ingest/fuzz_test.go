package ingest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// fuzzMaxDeliveries is the fuzzed ingester's delivery bound.
const fuzzMaxDeliveries = 3

// FuzzIngest drives arbitrary subject, header and body bytes through a real JetStream and a
// real ledger, as a producer speaking the protocol itself may send them. Every message
// JetStream stored ends as an intent or a reject with its own reason (never unstorable: a
// healthy ledger stores every message as what it is), within the delivery bound, with its
// subject and headers stored as they came. make fuzz runs it; go test runs its seeds.
func FuzzIngest(f *testing.F) {
	for _, s := range []struct{ subject, header, body string }{
		{"acct-1", "", post("a seed")},
		{"acct-1", string(headerBlock("Atmost-Delivery-Key: dk1:" + strings.Repeat("0", 64))), post("a seed")},
		{"acct-1", string(headerBlock("K\x00: v\x00\xff")), "bad"},
		{"a\x00b.\xff", "", `{"v":1,"account":"acct-1","action":"post","request":{"text":"a\u0000b"}}`},
		{"acct-1", string(headerBlock("Status: 100")), ""},
		{"acct-1", string(headerBlock("Status: 404")), ""},
		{"acct-1", "NATS/1.0 408 Request Timeout\r\n\r\n", ""},
		{"acct-1", string(headerBlock("Nats-Pin-Id: x")), post("pinned")},
		{"acct-1", "garbage\r\n\r\n", post("garbage header")},
		{"acct-1", string(headerBlock("K: base64:AAAA", "K: v", ": empty key")), "{"},
		{strings.Repeat("s", 3900), "", "\xff"},
		{"acct-1", string(headerBlock(strings.Repeat("x", 60000))), "bad"},
		{"nobody", "", `{"v":1,"account":"nobody","action":"post","request":{}}`},
	} {
		f.Add([]byte(s.subject), []byte(s.header), []byte(s.body))
	}

	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	db := dbtest.New(f)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(f, err)
	l, err := ledger.New(db.AppPool(f), ledger.Config{Actor: "fuzz"})
	require.NoError(f, err)
	srv := natstest.New(f)
	js := srv.Streams(f)
	in, err := ingest.New(ctx, js, l, ingest.Config{Batch: 1, MaxWait: 100 * time.Millisecond, NakDelay: time.Millisecond, MaxDeliveries: fuzzMaxDeliveries})
	require.NoError(f, err)
	prod := newRawProducer(f, srv.URL)
	intents, err := js.Stream(ctx, events.IntentsStream)
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, subject, header, body []byte) {
		if bytes.ContainsAny(subject, " \t\r\n") {
			t.Skip("whitespace ends a subject in the protocol")
		}
		var hdr []byte
		if len(header) > 0 {
			hdr = header
		}
		subj := "atmost.intent." + string(subject)
		p := prod.publish(t, subj, hdr, body)
		if p.Refusal != "" {
			t.Skip("not stored; the producer was told: " + p.Refusal)
		}

		var end ingest.Stats
		deliveries, idle := 0, 0
		for deliveries < fuzzMaxDeliveries+2 && end.Created+end.Duplicates+end.Rejected+end.Unstorable == 0 {
			s, err := in.Batch(ctx)
			require.NoError(t, err)
			if s == (ingest.Stats{}) {
				idle++
				require.Less(t, idle, 20, "seq %d: never delivered", p.Seq)
				continue
			}
			deliveries++
			end.Created, end.Duplicates, end.Rejected, end.Unstorable = s.Created, s.Duplicates, s.Rejected, s.Unstorable
		}
		require.LessOrEqual(t, deliveries, fuzzMaxDeliveries, "seq %d: delivered more than the bound", p.Seq)
		require.Zero(t, end.Unstorable, "seq %d: a healthy ledger stores every message as what it is", p.Seq)
		require.Equal(t, 1, end.Created+end.Duplicates+end.Rejected, "seq %d: one outcome", p.Seq)

		if end.Rejected == 1 {
			rows, err := l.Rejects(ctx, "", 1)
			require.NoError(t, err)
			require.Len(t, rows, 1)
			r := rows[0]
			require.Equal(t, int64(p.Seq), r.StreamSeq)
			require.True(t, identity.Reason(r.Reason).Valid())
			require.Equal(t, subj, r.Subject, "the subject as it came")
			sum := sha256.Sum256(body)
			require.Equal(t, sum[:], r.SHA256)
			require.Equal(t, len(body), r.Size)
			// The headers as JetStream holds them, which is not always as they were sent (it
			// drops a block with nothing but a first line, status and all).
			held, err := intents.GetMsg(ctx, p.Seq)
			switch {
			case err != nil && errors.Is(err, nats.ErrBadHeaderMsg):
				require.Equal(t, string(identity.ReasonInvalidHeader), r.Reason)
			default:
				require.NoError(t, err)
				want := map[string][]string(held.Header)
				if want == nil {
					want = map[string][]string{}
				}
				require.Equal(t, want, r.Headers, "the headers as they came")
			}
			return
		}
		env, err := identity.ParseEnvelope(body)
		require.NoError(t, err, "an intent is a valid envelope")
		require.Equal(t, events.IntentSubject(env.Account), subj, "an intent came on its account's subject")
		n := 0
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE delivery_key = $1`, env.DeliveryKey().Bytes()).Scan(&n))
		require.Equal(t, 1, n)
	})
}
