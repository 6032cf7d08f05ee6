package events_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

func key(t *testing.T, text string) identity.DeliveryKey {
	t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	e, err := identity.NewEnvelope("acct.with dots*", "post", "", req, "", nil)
	require.NoError(t, err)
	return e.DeliveryKey()
}

func sample(t *testing.T) []events.Event {
	t.Helper()
	k := key(t, "hello")
	token, err := identity.NewAttemptToken()
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)
	created := events.Event{V: 1, ID: events.NewID(k, 1), DeliveryKey: k, Seq: 1, Account: "acct.with dots*",
		To: "pending", Reason: "submitted", Actor: "ingest", At: at}
	authorized := events.Event{V: 1, ID: events.NewID(k, 3), DeliveryKey: k, Seq: 3, Account: "acct.with dots*",
		From: "pending", To: "authorized", Reason: "authorized", Attempt: &token, Epoch: 1, Generation: 7, Actor: "dispatcher", At: at}
	return []events.Event{created, authorized}
}

func TestIDsAreStablePerTransitionAndParseBack(t *testing.T) {
	k := key(t, "stable")
	require.Equal(t, events.NewID(k, 4), events.NewID(k, 4))
	require.NotEqual(t, events.NewID(k, 4), events.NewID(k, 5))
	require.NotEqual(t, events.NewID(k, 4), events.NewID(key(t, "other"), 4))
	gotKey, seq, err := events.ParseID(string(events.NewID(k, 42)))
	require.NoError(t, err)
	require.Equal(t, k, gotKey)
	require.Equal(t, int64(42), seq)
	for _, bad := range []string{"", "ev2:00:1", "ev1:zz:1", "ev1:" + strings.Repeat("0", 64), "ev1:" + strings.Repeat("0", 64) + ":0",
		"ev1:" + strings.Repeat("0", 64) + ":01", "ev1:" + strings.Repeat("0", 64) + ":-1"} {
		_, _, err := events.ParseID(bad)
		require.ErrorIs(t, err, events.ErrMalformedID, bad)
	}
}

func TestSubjectsAreValidForAnyAccount(t *testing.T) {
	for _, account := range []string{"acct-1", "a.b", "a*b", "a>b", "a b", "ünï", "~x"} {
		for subject, want := range map[string]int{
			events.IntentSubject(account):           3,
			events.EventSubject("pending", account): 4,
			events.DispatchSubject(account):         3,
		} {
			tokens := strings.Split(subject, ".")
			require.Len(t, tokens, want, "%q: the account is one token", subject)
			last := tokens[len(tokens)-1]
			require.NotContains(t, last, "*")
			require.NotContains(t, last, ">")
			require.NotContains(t, last, " ")
			back, err := identity.ParseAccountToken(last)
			require.NoError(t, err)
			require.Equal(t, account, back)
		}
	}
	require.Equal(t, "atmost.rejected.key_mismatch", events.RejectSubject(identity.ReasonKeyMismatch))
}

// A consumer of one state's events (the reconciler's, of indeterminate ones) sees that state's
// events of every account and no other state's, by the server's own subject matching.
func TestStateSubjectsMatchEveryAccountOfThatStateOnly(t *testing.T) {
	filter := events.StateSubjects("indeterminate")
	for _, account := range []string{"acct-1", "a.b", "a*b", "a>b", "a b", "ünï", "~x"} {
		require.True(t, server.SubjectMatchesFilter(events.EventSubject("indeterminate", account), filter), "%q", account)
		require.False(t, server.SubjectMatchesFilter(events.EventSubject("parked", account), filter), "%q", account)
	}
	require.True(t, server.IsValidSubject(filter))
}

func TestAccountSubjectsMatchEveryStateOfThatAccountOnly(t *testing.T) {
	accounts := []string{"acct-1", "a.b", "a*b", "a>b", "a b", "ünï", "~x", "*", ">"}
	for _, account := range accounts {
		filter := events.AccountSubjects(account)
		require.True(t, server.IsValidSubject(filter), "%q", account)
		for _, state := range []string{"pending", "authorized", "published", "failed", "indeterminate", "parked"} {
			require.True(t, server.SubjectMatchesFilter(events.EventSubject(state, account), filter), "%q %s", account, state)
			for _, other := range accounts {
				if other != account {
					require.False(t, server.SubjectMatchesFilter(events.EventSubject(state, other), filter), "%q matches %q", filter, other)
				}
			}
		}
	}
}

func TestEventsRoundTripAndMatchThePublishedSchema(t *testing.T) {
	schema := compileSchema(t)
	for _, e := range sample(t) {
		payload, err := e.Marshal()
		require.NoError(t, err)
		var doc any
		require.NoError(t, json.Unmarshal(payload, &doc))
		require.NoError(t, schema.Validate(doc), string(payload))
		back, err := events.Unmarshal(payload)
		require.NoError(t, err)
		require.Equal(t, e.ID, back.ID)
		require.True(t, e.At.Equal(back.At))
		require.Equal(t, e.Subject(), back.Subject())
	}
}

// The schema must refuse what the type refuses, or it documents nothing.
func TestSchemaAndTypeRefuseMalformedEvents(t *testing.T) {
	schema := compileSchema(t)
	good, err := sample(t)[1].Marshal()
	require.NoError(t, err)
	for name, mutate := range map[string]func(m map[string]any){
		"unknown state":   func(m map[string]any) { m["to"] = "in_flight" },
		"unknown field":   func(m map[string]any) { m["extra"] = 1 },
		"wrong version":   func(m map[string]any) { m["v"] = 2 },
		"missing actor":   func(m map[string]any) { delete(m, "actor") },
		"bad attempt":     func(m map[string]any) { m["attempt"] = "at1:xyz" },
		"id of other seq": func(m map[string]any) { m["seq"] = 4 },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		mutate(m)
		bad, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = events.Unmarshal(bad)
		require.Error(t, err, "type accepts %s", name)
		if name != "id of other seq" { // a cross-field rule the schema cannot state
			require.Error(t, schema.Validate(m), "schema accepts %s", name)
		}
	}
}

func TestWorkItemsBelongToTheirIntent(t *testing.T) {
	k := key(t, "work")
	w := events.WorkItem{V: 1, DeliveryKey: k, Account: "acct-1", Event: events.NewID(k, 1)}
	payload, err := json.Marshal(w)
	require.NoError(t, err)
	back, err := events.UnmarshalWorkItem(payload)
	require.NoError(t, err)
	require.Equal(t, w, back)
	require.Equal(t, "work:"+string(w.Event), w.MsgID())
	require.Equal(t, "atmost.dispatch.acct-1", w.Subject())

	w.Event = events.NewID(key(t, "someone else"), 1)
	payload, err = json.Marshal(w)
	require.NoError(t, err)
	_, err = events.UnmarshalWorkItem(payload)
	require.Error(t, err)
}

// A work item vouches for its intent's events up to its own only when it says it follows
// them; the field is left out otherwise, so an older dispatcher reads either alike.
func TestAWorkItemAcknowledgesTheEventsItFollowsOnly(t *testing.T) {
	k := key(t, "work")
	w := events.WorkItem{V: 1, DeliveryKey: k, Account: "acct-1", Event: events.NewID(k, 3)}
	require.Zero(t, w.Acknowledged())
	payload, err := json.Marshal(w)
	require.NoError(t, err)
	require.NotContains(t, string(payload), "follows")

	w.Follows = true
	require.Equal(t, int64(3), w.Acknowledged())
	payload, err = json.Marshal(w)
	require.NoError(t, err)
	back, err := events.UnmarshalWorkItem(payload)
	require.NoError(t, err)
	require.Equal(t, w, back)
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("event.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("event.schema.json", doc))
	schema, err := c.Compile("event.schema.json")
	require.NoError(t, err)
	return schema
}

// Marshal appends an event's fields by hand; what it writes must be byte for byte what
// encoding/json writes for the struct, which consumers and the schema were written against:
// every optional field present and absent, accounts and actors that need escaping (quotes,
// control characters, HTML's <>&, U+2028, invalid UTF-8, any script), times of any precision
// and zone.
func TestMarshalWritesWhatEncodingJSONWrites(t *testing.T) {
	k := key(t, "marshal")
	token, err := identity.NewAttemptToken()
	require.NoError(t, err)
	texts := []string{"acct-1", "acct.with dots*", `quote"d`, `back\slash`, "tab\there", "line\nbreak", "nul\x00",
		"<script>&</script>", "sep\u2028par\u2029", "invalid \xff\xfe utf-8", "ünïcödé 账户 🚀", "del\x7f", " "}
	zone := time.FixedZone("odd", -(3*3600 + 30*60))
	times := []time.Time{
		time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC),
		time.Date(2026, 11, 29, 12, 0, 0, 1, zone),
		time.Now(), // with a monotonic reading
	}
	n := 0
	for i, account := range texts {
		for j, actor := range texts {
			for seq := int64(1); seq <= 3; seq++ {
				e := events.Event{V: events.Version, ID: events.NewID(k, seq), DeliveryKey: k, Seq: seq, Account: account,
					To: "pending", Reason: "submitted", Actor: actor, At: times[(i+j+int(seq))%len(times)]}
				if seq > 1 {
					e.From, e.To, e.Reason = "pending", "authorized", "authorized"
				}
				if seq == 3 {
					e.Attempt, e.Epoch, e.Generation = &token, 1, int64(i*100+j)
				}
				if seq == 2 && i%2 == 0 {
					e.Attempt = &token // an attempt without an epoch or a generation
				}
				want, err := json.Marshal(e)
				require.NoError(t, err)
				got, err := e.Marshal()
				require.NoError(t, err)
				require.Equal(t, string(want), string(got))
				n++
			}
		}
	}
	require.Equal(t, len(texts)*len(texts)*3, n)
}

func TestNewIDIsTheKeysHexAndTheSequence(t *testing.T) {
	k := key(t, "id")
	for _, seq := range []int64{1, 9, 10, 1 << 40} {
		require.Equal(t, events.ID(fmt.Sprintf("ev1:%x:%d", k.Bytes(), seq)), events.NewID(k, seq))
	}
}

// go test -run '^$' -bench Marshal ./pkg/events/: an event as Marshal writes it, and as
// encoding/json did.
func BenchmarkMarshal(b *testing.B) {
	req, err := json.Marshal(map[string]string{"text": "bench"})
	require.NoError(b, err)
	env, err := identity.NewEnvelope("acct-1", "post", "", req, "", nil)
	require.NoError(b, err)
	k := env.DeliveryKey()
	token, err := identity.NewAttemptToken()
	require.NoError(b, err)
	e := events.Event{V: 1, ID: events.NewID(k, 3), DeliveryKey: k, Seq: 3, Account: "acct-1", From: "pending", To: "authorized",
		Reason: "authorized", Attempt: &token, Epoch: 1, Generation: 7, Actor: "dispatcher", At: time.Now()}
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.Validate(); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestValidateRefusesAnIDOfAnotherTransition(t *testing.T) {
	k, other := key(t, "validate"), key(t, "another")
	e := events.Event{V: events.Version, ID: events.NewID(k, 2), DeliveryKey: k, Seq: 2, Account: "acct-1",
		From: "pending", To: "authorized", Reason: "authorized", Actor: "dispatcher", At: time.Now()}
	require.NoError(t, e.Validate())
	for name, id := range map[string]events.ID{
		"another sequence": events.NewID(k, 3), "another intent": events.NewID(other, 2),
		"a prefix of it": e.ID[:len(e.ID)-1], "more than it": e.ID + "0", "empty": "",
	} {
		bad := e
		bad.ID = id
		require.Error(t, bad.Validate(), name)
		_, err := bad.Marshal()
		require.Error(t, err, name)
	}
}

func TestWorkItemMarshalWritesWhatEncodingJSONWrites(t *testing.T) {
	k := key(t, "work")
	for _, account := range []string{"acct-1", "acct.with dots*", `quote"d`, "ünïcödé 账户", "invalid \xff utf-8", "<&>", "nul\x00"} {
		for _, follows := range []bool{false, true} {
			w := events.WorkItem{V: events.Version, DeliveryKey: k, Account: account, Event: events.NewID(k, 3), Follows: follows}
			want, err := json.Marshal(w)
			require.NoError(t, err)
			require.Equal(t, string(want), string(w.Marshal()))
			back, err := events.UnmarshalWorkItem(w.Marshal())
			require.NoError(t, err)
			require.Equal(t, w.Follows, back.Follows)
			require.Equal(t, w.Event, back.Event)
		}
	}
}

// From, To and Reason are typed (atmosttype.State, atmosttype.Reason), and the wire form is what
// it was when they were strings: the same names, plain JSON strings, "" for the first from.
func TestTheTypedFieldsKeepTheWireForm(t *testing.T) {
	k := key(t, "wire")
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)
	e := events.Event{V: 1, ID: events.NewID(k, 2), DeliveryKey: k, Seq: 2, Account: "acct-1",
		From: atmosttype.Pending, To: atmosttype.Parked, Reason: atmosttype.ReasonOperatorParked, Actor: "alice", At: at}
	want := fmt.Sprintf(`{"v":1,"id":"%s","delivery_key":"%s","seq":2,"account":"acct-1","from":"pending","to":"parked",`+
		`"reason":"operator_parked","actor":"alice","at":"2026-11-29T12:00:00.123456Z"}`, e.ID, k)
	got, err := e.Marshal()
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	reflected, err := json.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, want, string(reflected))

	back, err := events.Unmarshal([]byte(want))
	require.NoError(t, err)
	require.Equal(t, e, back)

	e.Seq, e.ID, e.From, e.To, e.Reason = 1, events.NewID(k, 1), "", atmosttype.Pending, atmosttype.ReasonSubmitted
	got, err = e.Marshal()
	require.NoError(t, err)
	require.Contains(t, string(got), `,"from":"","to":"pending","reason":"submitted",`)
}
