package platform_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

func wire() (method, url string, header map[string][]string, body []byte) {
	return "POST", "https://example.org/hook",
		map[string][]string{"Idempotency-Key": {"dk1:ab"}, "Content-Type": {"application/json"}, "X-Trace": {"a", "b"}},
		[]byte(`{"text":"hello"}`)
}

func hashOf(method, url string, header map[string][]string, body []byte) [32]byte {
	return platform.NewPrepared(platform.Request{}, method, url, header, body).Hash
}

func TestPreparedHashIsDeterministic(t *testing.T) {
	m, u, h, b := wire()
	want := hashOf(m, u, h, b)
	require.NotEqual(t, [32]byte{}, want)
	for range 50 {
		// A fresh map each time: Go iterates maps in a random order, the hash must not care.
		_, _, h2, _ := wire()
		require.Equal(t, want, hashOf(m, u, h2, b))
	}
	// Insertion order does not matter either.
	reordered := map[string][]string{}
	reordered["X-Trace"] = []string{"a", "b"}
	reordered["Content-Type"] = []string{"application/json"}
	reordered["Idempotency-Key"] = []string{"dk1:ab"}
	require.Equal(t, want, hashOf(m, u, reordered, b))

	// The hash covers the wire only: what the request was for is not part of it.
	p := platform.NewPrepared(platform.Request{Account: "acct", Action: "post", Text: "hello",
		Request: json.RawMessage(`{"text":"hello"}`)}, m, u, h, b)
	require.Equal(t, want, p.Hash)
	require.Equal(t, m, p.Method)
	require.Equal(t, u, p.URL)
	require.Equal(t, h, p.Header)
	require.Equal(t, b, p.Body)
	require.Equal(t, "acct", p.Request.Account)
}

func TestPreparedHashChangesWithEveryPartOfTheWireRequest(t *testing.T) {
	m, u, h, b := wire()
	base := hashOf(m, u, h, b)
	with := func(edit func(h map[string][]string)) map[string][]string {
		_, _, c, _ := wire()
		edit(c)
		return c
	}
	for name, got := range map[string][32]byte{
		"method":                 hashOf("PUT", u, h, b),
		"url":                    hashOf(m, u+"2", h, b),
		"url case":               hashOf(m, "https://example.org/Hook", h, b),
		"body":                   hashOf(m, u, h, []byte(`{"text":"hellO"}`)),
		"no body":                hashOf(m, u, h, nil),
		"header value":           hashOf(m, u, with(func(h map[string][]string) { h["Idempotency-Key"] = []string{"dk1:ac"} }), b),
		"header name":            hashOf(m, u, with(func(h map[string][]string) { h["X-Trace2"] = h["X-Trace"]; delete(h, "X-Trace") }), b),
		"header added":           hashOf(m, u, with(func(h map[string][]string) { h["X-New"] = []string{"1"} }), b),
		"header removed":         hashOf(m, u, with(func(h map[string][]string) { delete(h, "Content-Type") }), b),
		"header value added":     hashOf(m, u, with(func(h map[string][]string) { h["X-Trace"] = append(h["X-Trace"], "c") }), b),
		"header values reversed": hashOf(m, u, with(func(h map[string][]string) { h["X-Trace"] = []string{"b", "a"} }), b),
	} {
		require.NotEqual(t, base, got, name)
	}
	// Fields are length-prefixed: moving bytes from one field to the next changes the hash.
	require.NotEqual(t, hashOf("POST", "ab", nil, []byte("c")), hashOf("POST", "a", nil, []byte("bc")))
	require.NotEqual(t,
		hashOf("POST", "u", map[string][]string{"A": {"bc"}}, nil),
		hashOf("POST", "u", map[string][]string{"Ab": {"c"}}, nil))
}

// platform's vocabulary is the ledger's: an adapter's outcome is recorded as it is.
func TestReasonsAndResultsAreTheLedgers(t *testing.T) {
	for _, c := range []struct {
		reason platform.Reason
		ledger ledger.Reason
		state  ledger.State
	}{
		{platform.ReasonConnectionFailed, ledger.ReasonConnectionFailed, ledger.Failed},
		{platform.ReasonPlatformRejected, ledger.ReasonPlatformRejected, ledger.Failed},
		{platform.ReasonSendUnknown, ledger.ReasonSendUnknown, ledger.Indeterminate},
	} {
		require.Equal(t, string(c.ledger), string(c.reason))
		rule, ok := c.reason.Rule()
		require.True(t, ok, c.reason)
		require.Equal(t, c.state, rule.State, c.reason)
	}
	require.Equal(t, string(ledger.Sent), string(platform.Sent))
	require.Equal(t, string(ledger.NotSent), string(platform.NotSent))
	require.Equal(t, string(ledger.Unknown), string(platform.Unknown))
	require.Equal(t, string(ledger.Found), string(platform.Found))
	require.Equal(t, string(ledger.NotFound), string(platform.NotFound))
	require.Equal(t, string(ledger.Unavailable), string(platform.Unavailable))
}

// A NotSent outcome signals what the adapter's capabilities declare of its status; no connection
// at all says the platform cannot take anything now; every other result signals nothing (the
// ledger derives it). The names are the ledger's.
func TestCapabilitiesSignalWhatTheyDeclare(t *testing.T) {
	t.Parallel()
	caps := platform.Capabilities{DefinitiveStatuses: []int{400, 401, 403, 429, 503},
		UnavailableStatuses: []int{429, 503}, AuthStatuses: []int{401, 403}}
	refused := func(status int) platform.Outcome {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonPlatformRejected, Detail: map[string]any{"status": status}}
	}
	for _, c := range []struct {
		o    platform.Outcome
		want platform.Signal
	}{
		{platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed, Detail: map[string]any{"step": "connect"}}, platform.SignalUnavailable},
		{refused(401), platform.SignalAuth},
		{refused(403), platform.SignalAuth},
		{refused(429), platform.SignalUnavailable},
		{refused(503), platform.SignalUnavailable},
		{refused(400), platform.SignalOK},
		{platform.Outcome{Result: platform.Sent, ObjectID: "o1"}, ""},
		{platform.Outcome{Result: platform.Unknown, Reason: platform.ReasonSendUnknown, Detail: map[string]any{"status": 503}}, ""},
	} {
		require.Equal(t, c.want, caps.Signal(c.o), "%+v", c.o)
	}
	require.Equal(t, platform.SignalOK, platform.Capabilities{}.Signal(refused(401)), "an adapter that declares nothing signals no auth failure")
	require.Equal(t, []int{401}, platform.DeclaredStatuses([]int{401, 403}, []int{400, 401}))
	for _, s := range []platform.Signal{platform.SignalOK, platform.SignalUnavailable, platform.SignalAuth} {
		require.Contains(t, []ledger.Signal{ledger.SignalOK, ledger.SignalUnavailable, ledger.SignalAuth}, s, "the ledger reads the adapter's signal under its name")
	}
}
