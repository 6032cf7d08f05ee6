package platformsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// start serves a simulator on a free port for the test's life.
func start(t *testing.T, cfg platformsim.Config) (*platformsim.Server, string) {
	t.Helper()
	s, err := platformsim.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	url, stopped, err := s.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	return s, url
}

// client returns an HTTP client of its own, closed with the test.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// answer is one HTTP exchange as a test sees it. Dropped is set when the connection died
// without an answer.
type answer struct {
	Status  int
	Header  http.Header
	Body    map[string]any
	Dropped bool
}

func do(t *testing.T, c *http.Client, method, url string, header map[string]string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// Without GetBody net/http cannot replay the request on a reused connection that died
	// (it would, for a request with an Idempotency-Key): each call is one request.
	req.GetBody = nil
	resp, err := c.Do(req)
	if err != nil {
		return answer{Dropped: true}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	if len(bytes.TrimSpace(raw)) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(raw, &a.Body), "body %s", raw)
	}
	return a
}

func create(t *testing.T, c *http.Client, url, account, action, key, body string) answer {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return do(t, c, http.MethodPost, url+"/v1/accounts/"+account+"/"+action, h, body)
}

func get(t *testing.T, c *http.Client, url string) answer {
	t.Helper()
	return do(t, c, http.MethodGet, url, nil, "")
}
