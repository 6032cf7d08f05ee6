package ingest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// apiAddr finds the HTTP API's address in the role's start-up line (its "http_api" field).
func apiAddr(log string) (string, bool) {
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Msg     string `json:"msg"`
			HTTPAPI string `json:"http_api"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "ingest running" && entry.HTTPAPI != "" {
			return entry.HTTPAPI, true
		}
	}
	return "", false
}

// curl runs curl with args and returns its standard output; the test fails when curl fails.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS"}, args...)...).Output()
	require.NoError(t, err, "curl %s", strings.Join(args, " "))
	return string(out)
}

// A producer's session as docs/producers.md shows it, with curl against the ingest role started
// with --http-api: publish, publish again, read the outcome, wait for it, follow the events,
// and be refused without a token; then the page's Python example. Under CI=true a machine
// without curl or python3 fails this test.
func TestACurlSessionAgainstTheIngestRole(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: %v (apt-get install %s)", tool, err, tool)
			}
			t.Skipf("%s is not installed: %v (apt-get install %s)", tool, err, tool)
		}
	}
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-42', 'sim')`)
	require.NoError(t, err)
	l, err := ledger.New(db.Pool, ledger.Config{})
	require.NoError(t, err)
	token, err := l.AddProducer(ctx, "my-bot", []string{"acct-42"}, ledger.Actor{Name: "user:test", Reason: "the curl session"})
	require.NoError(t, err)
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL,
		"ATMOST_INGEST_HTTP_API": "127.0.0.1:1"}, "--http-api", "127.0.0.1:0")
	r.WaitReady(t)
	addr, ok := apiAddr(r.Stderr())
	require.True(t, ok, r.Stderr())
	base := "http://" + addr
	auth := "Authorization: Bearer " + token

	// The first steps of docs/producers.md's HTTP section.
	envelope := `{"v":1,"account":"acct-42","action":"post","request":{"text":"Hello, world"}}`
	out := curl(t, "-w", "\n%{http_code}", "-H", auth, "-d", envelope, base+"/v1/intents")
	require.True(t, strings.HasSuffix(out, "\n202"), out)
	var receipt struct {
		Key       string `json:"delivery_key"`
		Seq       int    `json:"seq"`
		Duplicate bool   `json:"duplicate"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(out, "\n202")), &receipt))
	require.Equal(t, "dk1:511846ef99381fa1b6932b1d773bfb07488ebcc0c3c2d51f63411114efe39717", receipt.Key, "the key of docs/producers.md's worked example")
	require.False(t, receipt.Duplicate)

	out = curl(t, "-H", auth, "-d", envelope, base+"/v1/intents")
	require.Contains(t, out, `"duplicate":true`)

	// The outcome, as soon as ingest stored it.
	require.Eventually(t, func() bool {
		out = curl(t, "-H", auth, base+"/v1/intents/"+receipt.Key+"?wait=1s")
		return strings.Contains(out, `"state":"pending"`)
	}, 20*time.Second, 10*time.Millisecond, out)

	// The account's events from the start of the stream (Last-Event-ID 0), read as they come.
	cmd := exec.Command("curl", "-sSN", "-H", auth, "-H", "Last-Event-ID: 0", base+"/v1/accounts/acct-42/events")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if lines.Text() == "event: pending" {
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Contains(t, seen, "event: pending", strings.Join(seen, "\n"))
	require.Contains(t, strings.Join(seen, "\n"), "id: ")

	// Without a token: a JSON refusal, nothing stored.
	out = curl(t, "-w", "\n%{http_code}", "-d", envelope, base+"/v1/intents")
	require.True(t, strings.HasSuffix(out, "\n401"), out)
	require.Contains(t, out, `"code":"unauthorized"`)

	// Someone else's account: 403.
	out = curl(t, "-w", "\n%{http_code}", "-H", auth, "-d", `{"v":1,"account":"acct-7","action":"post","request":{}}`, base+"/v1/intents")
	require.True(t, strings.HasSuffix(out, "\n403"), out)
	r.WaitMetrics(t, `atmost_http_api_requests_total{code="",route="publish",status="202"} 2`)

	// The Python example of docs/producers.md, as it stands there, on the same envelope: a
	// duplicate, whose outcome it waits for (an operator parks it meanwhile).
	key, err := identity.ParseDeliveryKey(receipt.Key)
	require.NoError(t, err)
	require.NoError(t, l.Park(ctx, key, ledger.Actor{Name: "user:test", Reason: "for the Python example"}))
	doc, err := os.ReadFile("../../../docs/producers.md")
	require.NoError(t, err)
	example := regexp.MustCompile("(?s)<!-- python-http:start -->\n```python\n(.*?)```\n<!-- python-http:end -->").FindSubmatch(doc)
	require.NotNil(t, example, "docs/producers.md holds the Python example")
	python := exec.Command("python3", "-c", string(example[1]))
	python.Env = append(os.Environ(), "ATMOST_API="+base, "ATMOST_TOKEN="+token)
	got, err := python.CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Equal(t, "stored as "+receipt.Key+" duplicate\n200 parked operator_parked\n", string(got))
	r.Stop(t)
}
