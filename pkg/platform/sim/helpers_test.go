package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
)

const account = "acct-42"

// startSim serves a simulator on a free port for the test's life.
func startSim(t *testing.T, cfg platformsim.Config) (*platformsim.Server, string) {
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

// open opens the adapter on url for account, with extra settings merged in.
func open(t *testing.T, url string, extra map[string]any) *adapter {
	t.Helper()
	s := map[string]any{"url": url}
	for k, v := range extra {
		s[k] = v
	}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	a, err := Open(platform.Account{ID: account, Platform: Name, Settings: raw})
	require.NoError(t, err)
	t.Cleanup(a.(*adapter).client.CloseIdle)
	return a.(*adapter)
}

// request is a post of text on account, as ingest would hand it to the dispatcher.
func request(t *testing.T, text string) platform.Request {
	t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	e, err := identity.NewEnvelope(account, "post", "", req, "", nil)
	require.NoError(t, err)
	got, ok := e.Text()
	require.True(t, ok)
	return platform.Request{Key: e.DeliveryKey(), Account: account, Action: "post", Request: e.Request, Text: got}
}

// closedURL is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return fmt.Sprintf("http://%s", addr)
}
