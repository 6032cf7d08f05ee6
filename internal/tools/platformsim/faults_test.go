package platformsim_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// The simulator's side of every fault: what the client gets and what the platform keeps. The
// adapter's tests (pkg/platform/sim) check what atmost makes of each.
func TestEachFaultAnswersAndCreatesAsDocumented(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fault       platformsim.Fault
		status      int // 0: the connection is dropped without an answer
		created     int
		definitive  int
		retryAfter  string
		createsFlag bool
	}{
		{fault: platformsim.FaultOK, status: http.StatusCreated, created: 1, createsFlag: true},
		{fault: platformsim.FaultDropBeforeRead, status: 0, created: 0},
		{fault: platformsim.FaultDropAfterRead, status: 0, created: 0},
		{fault: platformsim.FaultDropAfterCommit, status: 0, created: 1, createsFlag: true},
		{fault: platformsim.FaultErrorAfterCommit, status: http.StatusInternalServerError, created: 1, createsFlag: true},
		{fault: platformsim.FaultDelay, status: http.StatusCreated, created: 1, createsFlag: true},
		{fault: platformsim.FaultRateLimited, status: http.StatusTooManyRequests, created: 0, retryAfter: "1"},
		{fault: platformsim.FaultReject, status: http.StatusUnprocessableEntity, created: 0},
		{fault: platformsim.FaultReject, status: http.StatusConflict, created: 0, definitive: http.StatusConflict},
	} {
		t.Run(fmt.Sprintf("%s_%d", c.fault, c.status), func(t *testing.T) {
			t.Parallel()
			s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{c.fault},
				Delay: 50 * time.Millisecond, DefinitiveStatus: c.definitive}})
			a := create(t, client(t), url, "a", "post", "k", `{"text":"x"}`)
			if c.status == 0 {
				require.True(t, a.Dropped, "the client sees a dead connection, not an HTTP answer")
			} else {
				require.False(t, a.Dropped)
				require.Equal(t, c.status, a.Status)
			}
			require.Equal(t, c.retryAfter, a.Header.Get("Retry-After"))
			require.Equal(t, c.created, s.Created("k"))
			require.Equal(t, 1, s.Received("k"), "exactly one request reached the platform")
			require.Equal(t, map[platformsim.Fault]int{c.fault: 1}, s.Counts().Faults)
			require.Equal(t, c.createsFlag, c.fault.Creates())
		})
	}
}

func TestDelayCommitsEvenWhenTheClientHasGone(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDelay},
		Delay: 300 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/accounts/a/post", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k")
	_, err = client(t).Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, s.Created("k"), "not yet: the platform is inside its delay")
	require.Eventually(t, func() bool { return s.Created("k") == 1 }, 2*time.Second, 10*time.Millisecond)
}

func TestScriptRunsFirstThenSeededRatesDecideTheSameWayEveryTime(t *testing.T) {
	t.Parallel()
	plan := platformsim.Plan{
		Seed:   42,
		Script: []platformsim.Fault{platformsim.FaultReject, platformsim.FaultRateLimited, platformsim.FaultReject},
		Rates: map[platformsim.Fault]float64{platformsim.FaultReject: 0.3, platformsim.FaultRateLimited: 0.2,
			platformsim.FaultErrorAfterCommit: 0.1},
		DefinitiveStatus: http.StatusForbidden,
	}
	run := func(p platformsim.Plan) ([]int, platformsim.Counts) {
		s, url := start(t, platformsim.Config{Plan: p})
		c := client(t)
		var statuses []int
		for i := range 120 {
			statuses = append(statuses, create(t, c, url, "a", "post", fmt.Sprint("k", i), `{}`).Status)
		}
		return statuses, s.Counts()
	}
	first, firstCounts := run(plan)
	again, againCounts := run(plan)
	require.Equal(t, []int{403, 429, 403}, first[:3], "the script, in arrival order")
	require.Equal(t, first, again, "the same seed draws the same faults")
	require.Equal(t, firstCounts.Faults, againCounts.Faults)
	seen := map[int]bool{}
	for _, st := range first[3:] {
		seen[st] = true
	}
	require.Equal(t, map[int]bool{201: true, 403: true, 429: true, 500: true}, seen, "every rate is drawn")

	other := plan
	other.Seed = 43
	different, _ := run(other)
	require.Equal(t, first[:3], different[:3])
	require.NotEqual(t, first, different, "another seed draws other faults")
}

func TestRatesAreRespectedOverManyDraws(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Seed: 7,
		Rates: map[platformsim.Fault]float64{platformsim.FaultReject: 0.25, platformsim.FaultRateLimited: 0.5}}})
	c := client(t)
	const n = 800
	for i := range n {
		create(t, c, url, "a", "post", fmt.Sprint("k", i), `{}`)
	}
	f := s.Counts().Faults
	require.InDelta(t, 0.25*n, f[platformsim.FaultReject], 0.06*n)
	require.InDelta(t, 0.5*n, f[platformsim.FaultRateLimited], 0.06*n)
	require.InDelta(t, 0.25*n, f[platformsim.FaultOK], 0.06*n)
	require.Equal(t, f[platformsim.FaultOK], s.Counts().Objects)
}
