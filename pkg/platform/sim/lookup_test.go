package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/platform"
)

func send(t *testing.T, a *adapter, r platform.Request) platform.Outcome {
	t.Helper()
	p, err := a.Prepare(r)
	require.NoError(t, err)
	return a.Send(context.Background(), p)
}

func TestReadBackReturnsTheStoredTextAndErrNotFoundForNoObject(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	r := request(t, "Grüße, \"world\" <&>")
	out := send(t, a, r)
	require.Equal(t, platform.Sent, out.Result)

	obj, err := a.ReadBack(context.Background(), r, out.ObjectID)
	require.NoError(t, err)
	require.Equal(t, platform.Object{ID: out.ObjectID, Text: "Grüße, \"world\" <&>"}, obj)

	_, err = a.ReadBack(context.Background(), r, "obj_missing")
	require.ErrorIs(t, err, platform.ErrNotFound)
}

func TestReadBackRefusesAnotherRequestsObject(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	mine, other := request(t, "mine"), request(t, "other")
	out := send(t, a, other)
	require.Equal(t, platform.Sent, out.Result)
	_, err := a.ReadBack(context.Background(), mine, out.ObjectID)
	require.ErrorContains(t, err, "not this request's")
	require.NotErrorIs(t, err, platform.ErrNotFound)
}

func TestReadBackOfAnUnreachablePlatformIsAnErrorNotErrNotFound(t *testing.T) {
	t.Parallel()
	a := open(t, closedURL(t), nil)
	_, err := a.ReadBack(context.Background(), request(t, "x"), "obj_1")
	require.Error(t, err)
	require.NotErrorIs(t, err, platform.ErrNotFound)
}

func TestStatusLookupProvesNotSentOnlyWhenThePlatformNeverSawTheKey(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{StatusLookup: true})
	a := open(t, url, map[string]any{"status_lookup": true})
	r := request(t, "status")

	l := a.Lookup(context.Background(), r)
	require.Equal(t, platform.NotFound, l.Result)
	require.True(t, l.ProvenNotSent)
	require.Equal(t, "not_seen", l.Detail["answer"])

	out := send(t, a, r)
	require.Equal(t, platform.Sent, out.Result)
	l = a.Lookup(context.Background(), r)
	require.Equal(t, platform.Lookup{Result: platform.Found, ObjectID: out.ObjectID,
		Detail: map[string]any{"lookup": "idempotency_status", "status": 200, "answer": "created"}}, l)
}

func TestStatusLookupAgainstASimulatorWithoutTheEndpointIsUnavailable(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{StatusLookup: false})
	a := open(t, url, map[string]any{"status_lookup": true})
	l := a.Lookup(context.Background(), request(t, "x"))
	require.Equal(t, platform.Unavailable, l.Result)
	require.False(t, l.ProvenNotSent)
	require.Equal(t, 404, l.Detail["status"])
}

func TestListingLookupFindsButNeverProvesNotSent(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{ListLag: 200 * time.Millisecond})
	a := open(t, url, nil)
	r := request(t, "listed later")

	l := a.Lookup(context.Background(), r)
	require.Equal(t, platform.NotFound, l.Result)
	require.False(t, l.ProvenNotSent, "an empty listing proves nothing")

	out := send(t, a, r)
	require.Equal(t, platform.Sent, out.Result)
	l = a.Lookup(context.Background(), r)
	require.Equal(t, platform.NotFound, l.Result, "the listing lags: the object exists and is not listed yet")
	require.False(t, l.ProvenNotSent)

	require.Eventually(t, func() bool {
		l = a.Lookup(context.Background(), r)
		return l.Result == platform.Found
	}, 2*time.Second, 20*time.Millisecond)
	require.Equal(t, out.ObjectID, l.ObjectID)
	require.Equal(t, "listing", l.Detail["lookup"])
}

func TestLookupOfAnUnreachablePlatformIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, statusLookup := range []bool{false, true} {
		a := open(t, closedURL(t), map[string]any{"status_lookup": statusLookup})
		l := a.Lookup(context.Background(), request(t, "x"))
		require.Equal(t, platform.Unavailable, l.Result)
		require.False(t, l.ProvenNotSent)
		require.Contains(t, l.Detail["error"], "connection refused")
	}
}

func TestLookupForAnotherAccountIsUnavailable(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, platformsim.Config{StatusLookup: true})
	a := open(t, url, map[string]any{"status_lookup": true})
	r := request(t, "x")
	r.Account = "someone-else"
	l := a.Lookup(context.Background(), r)
	require.Equal(t, platform.Unavailable, l.Result)
	require.Contains(t, l.Detail["error"], "another account")
}

// A grouped read answers each item as ReadBack would: the object, ErrNotFound for an id the
// platform does not have, an error for another request's object; more than 100 items take
// more than one request.
func TestReadBackManyAnswersEachItemAsReadBackWould(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	var items []platform.ReadItem
	for i := range 130 {
		r := request(t, fmt.Sprintf("grouped %d", i))
		out := send(t, a, r)
		require.Equal(t, platform.Sent, out.Result)
		items = append(items, platform.ReadItem{Request: r, ObjectID: out.ObjectID})
	}
	mine := request(t, "mine")
	items = append(items,
		platform.ReadItem{Request: request(t, "never sent"), ObjectID: "obj_missing"},
		platform.ReadItem{Request: mine, ObjectID: items[0].ObjectID}, // another request's object
		platform.ReadItem{Request: mine, ObjectID: ""})

	got := a.ReadBackMany(context.Background(), items)
	require.Len(t, got, len(items))
	for i := range 130 {
		require.NoError(t, got[i].Err)
		require.Equal(t, platform.Object{ID: items[i].ObjectID, Text: fmt.Sprintf("grouped %d", i)}, got[i].Object)
	}
	require.ErrorIs(t, got[130].Err, platform.ErrNotFound)
	require.ErrorContains(t, got[131].Err, "not this request's")
	require.NotErrorIs(t, got[131].Err, platform.ErrNotFound)
	require.ErrorContains(t, got[132].Err, "empty object id")
	require.Equal(t, 2, s.Counts().GroupedReads, "133 items, 100 ids a request")
}

func TestReadBackManyOfAnUnreachablePlatformFailsEveryItemNotAsNotFound(t *testing.T) {
	t.Parallel()
	a := open(t, closedURL(t), nil)
	got := a.ReadBackMany(context.Background(), []platform.ReadItem{{Request: request(t, "x"), ObjectID: "obj_1"}, {Request: request(t, "y"), ObjectID: "obj_2"}})
	require.Len(t, got, 2)
	for _, r := range got {
		require.Error(t, r.Err)
		require.NotErrorIs(t, r.Err, platform.ErrNotFound)
	}
}
