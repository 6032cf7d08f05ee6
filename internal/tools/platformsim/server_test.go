package platformsim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

func TestCreateStoresTheObjectAndGetByIDReturnsIt(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{})
	c := client(t)
	a := create(t, c, url, "acct%2F1", "post", "k1", `{"text":"Hello, world","target":"t-9","extra":[1,2]}`)
	require.Equal(t, http.StatusCreated, a.Status)
	id, _ := a.Body["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "acct/1", a.Body["account"], "the account is the unescaped path segment")
	require.Equal(t, "post", a.Body["action"])
	require.Equal(t, "k1", a.Body["key"])
	require.Equal(t, "Hello, world", a.Body["text"])

	got := get(t, c, url+"/v1/objects/"+id)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, a.Body, got.Body)
	require.Equal(t, "t-9", got.Body["target"])

	o, ok := s.Object(id)
	require.True(t, ok)
	require.Equal(t, platformsim.Object{ID: id, Account: "acct/1", Action: "post", Key: "k1", Text: "Hello, world",
		Target: "t-9", CreatedAt: o.CreatedAt}, o)
	require.WithinDuration(t, time.Now(), o.CreatedAt, 5*time.Second)
	require.Equal(t, []platformsim.Object{o}, s.Objects("k1"))
}

func TestObjectIDsAreUnique(t *testing.T) {
	t.Parallel()
	_, url := start(t, platformsim.Config{})
	c := client(t)
	seen := map[string]bool{}
	for range 20 {
		a := create(t, c, url, "a", "like", "same-key", `{}`)
		require.Equal(t, http.StatusCreated, a.Status)
		id := a.Body["id"].(string)
		require.False(t, seen[id], "id %s handed out twice", id)
		seen[id] = true
	}
}

func TestUnknownObjectIs404(t *testing.T) {
	t.Parallel()
	_, url := start(t, platformsim.Config{})
	a := get(t, client(t), url+"/v1/objects/obj_nope")
	require.Equal(t, http.StatusNotFound, a.Status)
	require.NotEmpty(t, a.Body["error"])
}

func TestAGroupedReadReturnsTheObjectsItNamesInOrderAndLeavesOutUnknownIDs(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{})
	c := client(t)
	first := create(t, c, url, "a", "post", "k1", `{"text":"one"}`).Body["id"].(string)
	second := create(t, c, url, "a", "post", "k2", `{"text":"two"}`).Body["id"].(string)

	got := get(t, c, url+"/v1/objects?id="+second+"&id=obj_nope&id="+first)
	require.Equal(t, http.StatusOK, got.Status)
	objs := got.Body["objects"].([]any)
	require.Len(t, objs, 2)
	require.Equal(t, second, objs[0].(map[string]any)["id"])
	require.Equal(t, "two", objs[0].(map[string]any)["text"])
	require.Equal(t, first, objs[1].(map[string]any)["id"])
	require.Equal(t, 1, s.Counts().GroupedReads)

	require.Equal(t, http.StatusBadRequest, get(t, c, url+"/v1/objects").Status, "no id named")
	many := url + "/v1/objects?id=x"
	for range platformsim.MaxObjectsPerRead {
		many += "&id=x"
	}
	tooMany := get(t, c, many)
	require.Equal(t, http.StatusBadRequest, tooMany.Status)
	require.Contains(t, tooMany.Body["error"], "at most 100")
}

func TestMalformedCreatesAreRefusedAndCreateNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, action, key, body string
	}{
		{"no idempotency key", "post", "", `{"text":"x"}`},
		{"empty body", "post", "k", ``},
		{"array body", "post", "k", `[]`},
		{"null body", "post", "k", `null`},
		{"string body", "post", "k", `"text"`},
		{"truncated object", "post", "k", `{"text":`},
		{"trailing data", "post", "k", `{} {}`},
		{"bad action", "Post", "k", `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url := start(t, platformsim.Config{})
			a := create(t, client(t), url, "a", c.action, c.key, c.body)
			require.Equal(t, http.StatusBadRequest, a.Status)
			require.NotEmpty(t, a.Body["error"])
			counts := s.Counts()
			require.Zero(t, counts.Objects)
			require.Equal(t, 1, counts.Requests)
		})
	}
}

func TestTextAndTargetAreKeptOnlyWhenStrings(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{})
	a := create(t, client(t), url, "a", "post", "k", `{"text":5,"target":{"id":"x"}}`)
	require.Equal(t, http.StatusCreated, a.Status)
	o := s.Objects("k")
	require.Len(t, o, 1)
	require.Empty(t, o[0].Text)
	require.Empty(t, o[0].Target)
}

func TestCountsEndpointAndMethodsAgree(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{
		platformsim.FaultOK, platformsim.FaultOK, platformsim.FaultReject, platformsim.FaultOK}}})
	c := client(t)
	require.Equal(t, http.StatusCreated, create(t, c, url, "a", "post", "twice", `{"text":"1"}`).Status)
	require.Equal(t, http.StatusCreated, create(t, c, url, "a", "post", "twice", `{"text":"1"}`).Status)
	require.Equal(t, http.StatusUnprocessableEntity, create(t, c, url, "a", "post", "refused", `{}`).Status)
	require.Equal(t, http.StatusCreated, create(t, c, url, "a", "post", "once", `{}`).Status)
	require.Equal(t, http.StatusBadRequest, create(t, c, url, "a", "post", "", `{}`).Status)

	want := platformsim.Counts{
		Created:          map[string]int{"twice": 2, "once": 1},
		Received:         map[string]int{"twice": 2, "refused": 1, "once": 1},
		Lookups:          map[string]int{},
		Faults:           map[platformsim.Fault]int{platformsim.FaultOK: 3, platformsim.FaultReject: 1},
		Objects:          3,
		Requests:         5,
		MaxCreatedPerKey: 2,
		KeysOverOne:      []string{"twice"},
	}
	require.Equal(t, want, s.Counts())
	require.Equal(t, 2, s.Created("twice"))
	require.Equal(t, 0, s.Created("refused"))
	require.Equal(t, 1, s.Received("refused"))
	require.Equal(t, 0, s.Received("never"))

	resp, err := c.Get(url + "/v1/counts")
	require.NoError(t, err)
	defer resp.Body.Close()
	var got platformsim.Counts
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, want, got)
}

func TestCountsOfAnEmptyPlatformAreEmptyNotNull(t *testing.T) {
	t.Parallel()
	_, url := start(t, platformsim.Config{})
	a := get(t, client(t), url+"/v1/counts")
	require.Equal(t, map[string]any{"created": map[string]any{}, "received": map[string]any{}, "lookups": map[string]any{}, "faults": map[string]any{},
		"objects": 0.0, "requests": 0.0, "grouped_reads": 0.0, "max_created_per_key": 0.0, "keys_over_one": []any{}}, a.Body)
}

func TestDedupeDecidesWhetherARepeatedKeyCreatesAgain(t *testing.T) {
	t.Parallel()
	for _, dedupe := range []bool{false, true} {
		t.Run(map[bool]string{false: "off: a double send shows as two objects", true: "on: the first object again, 200"}[dedupe], func(t *testing.T) {
			t.Parallel()
			s, url := start(t, platformsim.Config{Dedupe: dedupe})
			c := client(t)
			first := create(t, c, url, "a", "post", "k", `{"text":"one"}`)
			second := create(t, c, url, "a", "post", "k", `{"text":"one"}`)
			require.Equal(t, http.StatusCreated, first.Status)
			require.Equal(t, 2, s.Received("k"))
			if dedupe {
				require.Equal(t, http.StatusOK, second.Status)
				require.Equal(t, first.Body, second.Body)
				require.Equal(t, 1, s.Created("k"))
				require.Empty(t, s.Counts().KeysOverOne)
			} else {
				require.Equal(t, http.StatusCreated, second.Status)
				require.NotEqual(t, first.Body["id"], second.Body["id"])
				require.Equal(t, 2, s.Created("k"))
				require.Equal(t, []string{"k"}, s.Counts().KeysOverOne)
			}
		})
	}
}

func TestListLagHidesNewObjectsFromTheListingButNotFromGetByID(t *testing.T) {
	t.Parallel()
	const lag = 300 * time.Millisecond
	_, url := start(t, platformsim.Config{ListLag: lag})
	c := client(t)
	sent := time.Now()
	a := create(t, c, url, "a", "post", "k", `{"text":"x"}`)
	require.Equal(t, http.StatusCreated, a.Status)
	created := time.Now()
	id := a.Body["id"].(string)

	require.Equal(t, http.StatusOK, get(t, c, url+"/v1/objects/"+id).Status)
	listed := get(t, c, url+"/v1/accounts/a/objects")
	if time.Since(created) < lag {
		require.Equal(t, map[string]any{"objects": []any{}}, listed.Body, "too new to be listed")
	}
	require.Eventually(t, func() bool {
		objs := get(t, c, url+"/v1/accounts/a/objects?key=k").Body["objects"].([]any)
		return len(objs) == 1 && objs[0].(map[string]any)["id"] == id
	}, 2*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(sent), lag, "listed no earlier than ListLag after the create")
}

func TestListingFiltersByAccountAndKey(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{})
	c := client(t)
	for _, x := range []struct{ account, key string }{{"a", "k1"}, {"a", "k2"}, {"b", "k1"}, {"a", "k1"}} {
		require.Equal(t, http.StatusCreated, create(t, c, url, x.account, "post", x.key, `{}`).Status)
	}
	keys := func(path string) []string {
		var out []string
		for _, o := range get(t, c, url+path).Body["objects"].([]any) {
			m := o.(map[string]any)
			out = append(out, m["account"].(string)+"/"+m["key"].(string))
		}
		return out
	}
	require.Equal(t, []string{"a/k1", "a/k2", "a/k1"}, keys("/v1/accounts/a/objects"), "oldest first")
	require.Equal(t, []string{"a/k1", "a/k1"}, keys("/v1/accounts/a/objects?key=k1"))
	require.Equal(t, []string{"b/k1"}, keys("/v1/accounts/b/objects?key=k1"))
	require.Empty(t, keys("/v1/accounts/b/objects?key=k2"))
	require.Empty(t, keys("/v1/accounts/nobody/objects"))
	// A listing filtered by key is a lookup, counted per key; an unfiltered one is not.
	require.Equal(t, map[string]int{"k1": 2, "k2": 1}, s.Counts().Lookups)
	require.Equal(t, 2, s.Lookups("k1"))
}

func TestStatusLookupAnswersNotSeenInProgressThenCreated(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{StatusLookup: true, Plan: platformsim.Plan{
		Script: []platformsim.Fault{platformsim.FaultDelay}, Delay: 400 * time.Millisecond}})
	c := client(t)
	status := func() map[string]any { return get(t, c, url+"/v1/idempotency/dk1:abc").Body }
	require.Equal(t, map[string]any{"status": "not_seen"}, status())

	done := make(chan answer, 1)
	go func() { done <- create(t, client(t), url, "a", "post", "dk1:abc", `{"text":"slow"}`) }()
	require.Eventually(t, func() bool { return s.Received("dk1:abc") == 1 }, time.Second, 5*time.Millisecond)
	require.Equal(t, map[string]any{"status": "in_progress"}, status(), "the create is inside its delay")
	require.Zero(t, s.Created("dk1:abc"))

	a := <-done
	require.Equal(t, http.StatusCreated, a.Status)
	require.Equal(t, map[string]any{"status": "created", "id": a.Body["id"]}, status())
	require.Equal(t, 3, s.Lookups("dk1:abc"), "each status lookup is counted")
}

func TestLatencyKeepsACreateInProgressUntilItCommits(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{StatusLookup: true, Latency: 300 * time.Millisecond})
	c := client(t)
	began := time.Now()
	done := make(chan answer, 1)
	go func() { done <- create(t, client(t), url, "a", "post", "k", `{}`) }()
	require.Eventually(t, func() bool { return s.Received("k") == 1 }, time.Second, 5*time.Millisecond)
	require.Equal(t, "in_progress", get(t, c, url+"/v1/idempotency/k").Body["status"])
	require.Equal(t, http.StatusCreated, (<-done).Status)
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond)
	require.Equal(t, "created", get(t, c, url+"/v1/idempotency/k").Body["status"])
}

func TestStatusLookupIsAbsentUnlessEnabled(t *testing.T) {
	t.Parallel()
	_, url := start(t, platformsim.Config{})
	c := client(t)
	require.Equal(t, http.StatusCreated, create(t, c, url, "a", "post", "k", `{}`).Status)
	a := get(t, c, url+"/v1/idempotency/k")
	require.Equal(t, http.StatusNotFound, a.Status)
	require.Contains(t, a.Body["error"], "no idempotency-status lookup")
}

func TestStatusLookupSaysNotSeenAfterRequestsThatCreatedNothing(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{StatusLookup: true, Plan: platformsim.Plan{Script: []platformsim.Fault{
		platformsim.FaultReject, platformsim.FaultDropAfterRead, platformsim.FaultRateLimited}}})
	c := client(t)
	for range 3 {
		create(t, c, url, "a", "post", "k", `{}`)
	}
	require.Equal(t, 3, s.Received("k"))
	// A dropped request is in progress until its handler returns, which may be just after the
	// client saw the connection die: that is what a platform's reconcile delay covers.
	require.Eventually(t, func() bool {
		return get(t, c, url+"/v1/idempotency/k").Body["status"] == "not_seen"
	}, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, map[string]any{"status": "not_seen"}, get(t, c, url+"/v1/idempotency/k").Body)
}

func TestConcurrentCreatesAreEachCountedOnce(t *testing.T) {
	t.Parallel()
	for _, dedupe := range []bool{false, true} {
		s, url := start(t, platformsim.Config{Dedupe: dedupe})
		const workers, each = 8, 25
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				c := client(t)
				for i := range each {
					create(t, c, url, "a", "post", fmt.Sprint("shared-", i), fmt.Sprintf(`{"text":"%d/%d"}`, w, i))
				}
			})
		}
		wg.Wait()
		counts := s.Counts()
		require.Equal(t, workers*each, counts.Requests)
		for i := range each {
			key := fmt.Sprint("shared-", i)
			require.Equal(t, workers, counts.Received[key])
			if dedupe {
				require.Equal(t, 1, counts.Created[key], "dedupe: one object per key whatever the race")
			} else {
				require.Equal(t, workers, counts.Created[key])
			}
		}
		if dedupe {
			require.Equal(t, each, counts.Objects)
			require.Equal(t, 1, counts.MaxCreatedPerKey)
		} else {
			require.Equal(t, workers*each, counts.Objects)
			require.Equal(t, workers, counts.MaxCreatedPerKey)
			require.Len(t, counts.KeysOverOne, each)
		}
	}
}
