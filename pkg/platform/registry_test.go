package platform_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
)

func TestResolveCredentialReadsEnvAndFileReferences(t *testing.T) {
	t.Setenv("ATMOST_TEST_CREDENTIAL", "s3cr3t-env")
	got, err := platform.ResolveCredential("env:ATMOST_TEST_CREDENTIAL")
	require.NoError(t, err)
	require.Equal(t, "s3cr3t-env", got)

	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("\n  s3cr3t-file \n\n"), 0o600))
	got, err = platform.ResolveCredential("file:" + path)
	require.NoError(t, err)
	require.Equal(t, "s3cr3t-file", got, "surrounding white space is trimmed")

	got, err = platform.ResolveCredential("")
	require.NoError(t, err)
	require.Empty(t, got, "no reference, no credential")
}

func TestResolveCredentialRefusesMissingAndMalformedReferences(t *testing.T) {
	_, err := platform.ResolveCredential("env:ATMOST_TEST_CREDENTIAL_NEVER_SET")
	require.ErrorIs(t, err, platform.ErrNoCredential)
	require.ErrorContains(t, err, "ATMOST_TEST_CREDENTIAL_NEVER_SET")

	_, err = platform.ResolveCredential("file:" + filepath.Join(t.TempDir(), "absent"))
	require.ErrorIs(t, err, platform.ErrNoCredential)

	for _, ref := range []string{"env:", "file:", "vault:acct/v2", "token", ":x", "ENV:X", "env:A=B", "env:A\x00", "file:/a\x00b"} {
		_, err := platform.ResolveCredential(ref)
		require.Error(t, err, ref)
		require.False(t, errors.Is(err, platform.ErrNoCredential), "%q is malformed, not missing", ref)
		require.ErrorIs(t, err, platform.ErrCredentialRef, ref)
		require.ErrorContains(t, err, "env:NAME or file:/path", ref)
		_, _, err = platform.ParseCredentialRef(ref)
		require.ErrorIs(t, err, platform.ErrCredentialRef, "the form is checked in one place: %q", ref)
	}
	for ref, want := range map[string][2]string{"": {"", ""}, "env:HOOK_TOKEN": {"env", "HOOK_TOKEN"}, "file:/run/secrets/t": {"file", "/run/secrets/t"}} {
		kind, name, err := platform.ParseCredentialRef(ref)
		require.NoError(t, err, ref)
		require.Equal(t, want, [2]string{kind, name}, ref)
	}
}

// A check reads the credential through Account.Credential when it is set, never the
// process's environment.
func TestSecretReadsThroughTheAccountsCredentialFunction(t *testing.T) {
	a := platform.Account{CredentialRef: "env:ATMOST_TEST_CREDENTIAL_NEVER_SET", Credential: func() (string, error) { return "given", nil }}
	v, err := a.Secret()
	require.NoError(t, err)
	require.Equal(t, "given", v)
	a.Credential = nil
	_, err = a.Secret()
	require.ErrorIs(t, err, platform.ErrNoCredential)
}

type stubAdapter struct{ platform.Adapter }

func (stubAdapter) Capabilities() platform.Capabilities { return platform.Capabilities{} }
func (stubAdapter) Lookup(context.Context, platform.Request) platform.Lookup {
	return platform.Lookup{Result: platform.Unavailable}
}

func TestRegistryOpensTheAccountsPlatform(t *testing.T) {
	opened := ""
	reg := platform.Registry{
		"webhook": func(a platform.Account) (platform.Adapter, error) { opened = a.ID; return stubAdapter{}, nil },
		"broken":  func(platform.Account) (platform.Adapter, error) { return nil, errors.New("bad settings") },
		"alpha":   func(platform.Account) (platform.Adapter, error) { return stubAdapter{}, nil },
	}
	ad, err := reg.Open(platform.Account{ID: "acct-1", Platform: "webhook"})
	require.NoError(t, err)
	require.NotNil(t, ad)
	require.Equal(t, "acct-1", opened)

	_, err = reg.Open(platform.Account{ID: "acct-2", Platform: "broken"})
	require.ErrorContains(t, err, `account "acct-2": platform "broken": bad settings`)

	_, err = reg.Open(platform.Account{ID: "acct-3", Platform: "mastodon"})
	require.ErrorIs(t, err, platform.ErrUnknownPlatform)
	require.ErrorContains(t, err, `account "acct-3": platform "mastodon"`)
	require.ErrorContains(t, err, "(have alpha, broken, webhook)", "the error names the known platforms, sorted")
}

// Register adds an adapter to the process's registry, which Registered copies; an empty name,
// a nil opener or a name taken panics, so no account's adapter depends on the order of
// registration.
func TestRegisterAddsAnAdapterOnceByName(t *testing.T) {
	open := func(platform.Account) (platform.Adapter, error) { return nil, errors.New("not opened") }
	name := "atmost-test-registered"
	require.NotContains(t, platform.Registered(), name)
	platform.Register(name, open)
	got := platform.Registered()
	require.Contains(t, got, name)
	delete(got, name)
	require.Contains(t, platform.Registered(), name, "Registered returns a copy")

	require.PanicsWithValue(t, `platform: Register called twice for "atmost-test-registered"`, func() { platform.Register(name, open) })
	require.Panics(t, func() { platform.Register("", open) })
	require.Panics(t, func() { platform.Register("atmost-test-nil", nil) })
	require.NotContains(t, platform.Registered(), "atmost-test-nil")
}
