package platformsim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

func TestInvalidPlansAreRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ json, want string }{
		{`{"script":["ok","explode"]}`, `script[1]: unknown fault "explode"`},
		{`{"rates":{"explode":0.1}}`, `rates: unknown fault "explode"`},
		{`{"rates":{"reject":0.6,"delay":0.5}}`, "rates sum to 1.1: must be at most 1"},
		{`{"rates":{"reject":-0.1}}`, "rate of reject is -0.1: must be between 0 and 1"},
		{`{"rates":{"reject":1.5}}`, "rate of reject is 1.5"},
		{`{"delay":"-1s"}`, "delay -1s: must not be negative"},
		{`{"delay":"soon"}`, `delay "soon"`},
		{`{"definitive_status":200}`, "definitive_status 200: must be between 400 and 599"},
		{`{"seed":1,"sede":2}`, `unknown field "sede"`},
		{`{"seed":1} {}`, "data after the plan object"},
		{`[]`, "cannot unmarshal array"},
		{``, "empty"},
	} {
		_, err := platformsim.ParsePlan([]byte(c.json))
		require.ErrorIs(t, err, platformsim.ErrInvalidPlan, c.json)
		require.ErrorContains(t, err, c.want, c.json)
	}
}

func TestValidPlansParseAndRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := platformsim.ParsePlan([]byte(`{"seed":9,"script":["ok","drop_after_commit"],"rates":{"delay":0.5,"ok":0.5},"delay":"1.5s","definitive_status":403}`))
	require.NoError(t, err)
	require.Equal(t, platformsim.Plan{Seed: 9, Script: []platformsim.Fault{platformsim.FaultOK, platformsim.FaultDropAfterCommit},
		Rates:            map[platformsim.Fault]float64{platformsim.FaultDelay: 0.5, platformsim.FaultOK: 0.5},
		Delay:            1500 * time.Millisecond,
		DefinitiveStatus: 403}, p)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	again, err := platformsim.ParsePlan(b)
	require.NoError(t, err)
	require.Equal(t, p, again)
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  platformsim.Config
		want string
	}{
		{platformsim.Config{Latency: -time.Second}, "latency -1s"},
		{platformsim.Config{ListLag: -time.Second}, "list lag -1s"},
		{platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{"boom"}}}, `unknown fault "boom"`},
	} {
		_, err := platformsim.New(c.cfg)
		require.ErrorIs(t, err, platformsim.ErrInvalidConfig)
		require.ErrorContains(t, err, c.want)
	}
	_, err := platformsim.New(platformsim.Config{Plan: platformsim.Plan{Delay: -1}})
	require.True(t, errors.Is(err, platformsim.ErrInvalidPlan), "a bad plan is also ErrInvalidPlan")
}

func TestPlanIsReadAndReplacedAtRunTime(t *testing.T) {
	t.Parallel()
	s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Seed: 3}})
	c := client(t)
	require.Equal(t, map[string]any{"seed": 3.0}, get(t, c, url+"/v1/plan").Body)

	put := do(t, c, http.MethodPut, url+"/v1/plan", nil, `{"seed":5,"script":["reject","reject"],"definitive_status":400}`)
	require.Equal(t, http.StatusOK, put.Status)
	require.Equal(t, map[string]any{"seed": 5.0, "script": []any{"reject", "reject"}, "definitive_status": 400.0}, put.Body)
	require.Equal(t, put.Body, get(t, c, url+"/v1/plan").Body)
	require.Equal(t, http.StatusBadRequest, create(t, c, url, "a", "post", "k", `{}`).Status)

	bad := do(t, c, http.MethodPut, url+"/v1/plan", nil, `{"rates":{"reject":2}}`)
	require.Equal(t, http.StatusBadRequest, bad.Status)
	require.Contains(t, bad.Body["error"], "rate of reject is 2")
	require.Equal(t, int64(5), s.Plan().Seed, "a refused plan leaves the old one in force")
	require.Equal(t, http.StatusBadRequest, create(t, c, url, "a", "post", "k", `{}`).Status, "its script goes on")
	require.Equal(t, http.StatusCreated, create(t, c, url, "a", "post", "k", `{}`).Status, "then no faults")

	require.NoError(t, s.SetPlan(platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultRateLimited}}))
	require.Equal(t, http.StatusTooManyRequests, create(t, c, url, "a", "post", "k", `{}`).Status, "a new plan starts its script over")
	require.ErrorIs(t, s.SetPlan(platformsim.Plan{Delay: -time.Second}), platformsim.ErrInvalidPlan)
}

func TestPlanReturnedIsACopy(t *testing.T) {
	t.Parallel()
	script := []platformsim.Fault{platformsim.FaultReject}
	s, url := start(t, platformsim.Config{Plan: platformsim.Plan{Script: script}})
	script[0] = platformsim.FaultOK
	p := s.Plan()
	p.Script[0] = platformsim.FaultOK
	require.Equal(t, http.StatusUnprocessableEntity, create(t, client(t), url, "a", "post", "k", `{}`).Status)
}
