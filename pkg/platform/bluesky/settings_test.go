package bluesky_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

func openWith(settings, ref string) (platform.Adapter, error) {
	return bluesky.Open(platform.Account{ID: "acct-1", Platform: bluesky.Name, Settings: json.RawMessage(settings), CredentialRef: ref})
}

func TestSettingsAreValidated(t *testing.T) {
	t.Setenv(passwordEnv, password)
	ref := "env:" + passwordEnv
	for _, c := range []struct{ settings, want string }{
		{``, "pds and identifier are required"},
		{`{}`, "pds is required"},
		{`null`, "not a JSON object"},
		{`[]`, "not a JSON object"},
		{`{"pds":"https://pds.example","identifier":"` + did + `","password":"x"}`, `unknown field "password"`},
		{`{"pds":"https://pds.example","identifier":"` + did + `","app_password":"x"}`, `unknown field "app_password"`},
		{`{"pds":"https://a.example","pds":"https://b.example","identifier":"` + did + `"}`, "duplicate"},
		{`{"pds":"https://pds.example","identifier":"` + did + `"} {}`, "trailing"},
		{`{"pds":"https://pds.example"}`, "identifier is required"},
		{`{"pds":"https://pds.example","identifier":"not a handle"}`, "neither a DID nor a handle"},
		{`{"pds":"https://pds.example","identifier":"@alice.test"}`, "neither a DID nor a handle"},
		{`{"pds":"https://pds.example","identifier":"did:PLC:x"}`, "neither a DID nor a handle"},
		{`{"pds":"ftp://pds.example","identifier":"` + did + `"}`, "want an https URL"},
		{`{"pds":"pds.example","identifier":"` + did + `"}`, "want an https URL"},
		{`{"pds":"https://","identifier":"` + did + `"}`, "no host"},
		{`{"pds":"https://u:p@pds.example","identifier":"` + did + `"}`, "user information"},
		{`{"pds":"https://pds.example?x=1","identifier":"` + did + `"}`, "query"},
		{`{"pds":"https://pds.example#f","identifier":"` + did + `"}`, "fragment"},
		{`{"pds":"http://pds.example","identifier":"` + did + `"}`, "http is allowed only for a loopback host"},
		{`{"pds":"http://10.0.0.1:2583","identifier":"` + did + `"}`, "http is allowed only for a loopback host"},
		{`{"pds":"https://pds.example","identifier":"` + did + `","reconcile_delay":"soon"}`, "reconcile_delay"},
		{`{"pds":"https://pds.example","identifier":"` + did + `","reconcile_delay":"0s"}`, "must be positive"},
		{`{"pds":"https://pds.example","identifier":"` + did + `","reconcile_delay":"-1s"}`, "must be positive"},
	} {
		_, err := openWith(c.settings, ref)
		require.ErrorIs(t, err, bluesky.ErrInvalidSettings, c.settings)
		require.ErrorContains(t, err, c.want, c.settings)
	}
}

func TestSettingsDefaultsAndLoopbackHTTP(t *testing.T) {
	t.Setenv(passwordEnv, password)
	ref := "env:" + passwordEnv
	for _, pds := range []string{"http://localhost:2583", "http://127.0.0.1:2583/", "http://[::1]:2583", "https://pds.example", "https://bsky.social/"} {
		_, err := openWith(`{"pds":"`+pds+`","identifier":"alice.test"}`, ref)
		require.NoError(t, err, pds)
	}
	ad, err := openWith(`{"pds":"https://pds.example/","identifier":"`+did+`"}`, ref)
	require.NoError(t, err)
	require.Equal(t, platform.Capabilities{StatusLookup: false, DefinitiveStatuses: []int{400, 401, 403, 413, 429},
		ContractVersion: "bluesky/v1", ReconcileDelay: 10 * time.Second, UnavailableStatuses: []int{429}, AuthStatuses: []int{401, 403}}, ad.Capabilities())
	bluesky.DefinitiveStatuses()[0] = 200
	require.Equal(t, []int{400, 401, 403, 413, 429}, bluesky.DefinitiveStatuses(), "the list is a copy")

	ad, err = openWith(`{"pds":"https://pds.example","identifier":"`+did+`","reconcile_delay":"1m","contract_version":"bluesky/v2"}`, ref)
	require.NoError(t, err)
	require.Equal(t, time.Minute, ad.Capabilities().ReconcileDelay)
	require.Equal(t, "bluesky/v2", ad.Capabilities().ContractVersion)

	p, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	require.Equal(t, "https://pds.example/xrpc/com.atproto.repo.createRecord", p.URL, "no double slash")
}

// The app password comes only from the credential reference, and no error shows it.
func TestTheCredentialComesFromTheReference(t *testing.T) {
	good := settings("https://pds.example")
	_, err := openWith(good, "")
	require.ErrorIs(t, err, bluesky.ErrInvalidSettings)
	require.ErrorContains(t, err, "no credential reference")

	_, err = openWith(good, "env:ATMOST_BLUESKY_TEST_NEVER_SET")
	require.ErrorIs(t, err, platform.ErrNoCredential)

	_, err = openWith(good, "vault:acct-1")
	require.ErrorContains(t, err, "env:NAME or file:/path")

	t.Setenv(passwordEnv, "")
	_, err = openWith(good, "env:"+passwordEnv)
	require.ErrorIs(t, err, bluesky.ErrInvalidSettings)
	require.ErrorContains(t, err, "is empty")

	file := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(file, []byte(password+"\n"), 0o600))
	_, err = openWith(good, "file:"+file)
	require.NoError(t, err)

}
