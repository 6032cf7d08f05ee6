package cli

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/pkg/ledger"
)

// jsonview.AccountOf carries every field of ledger.Account, each under a snake_case key: a field
// added to the ledger's account turns this red until the JSON has it too.
func TestAccountJSONCarriesEveryFieldInSnakeCase(t *testing.T) {
	a := ledger.Account{ID: "acct-1", Platform: "webhook", Settings: json.RawMessage(`{"url": "https://example.org", "Header": "X"}`),
		CredentialRef: "env:HOOK", CredentialVersion: 3, Revoked: true, Disabled: true, ContractVersion: "v2",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2026, 1, 3, 3, 4, 5, 0, time.UTC)}
	v := reflect.ValueOf(a)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "the sample sets ledger.Account.%s", v.Type().Field(i).Name)
	}
	out, err := json.Marshal(jsonview.AccountOf(a))
	require.NoError(t, err)
	bad, err := NonSnakeKeys(out)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.JSONEq(t, `{"account": "acct-1", "platform": "webhook", "settings": {"url": "https://example.org", "Header": "X"},
		"credential_ref": "env:HOOK", "credential_version": 3, "revoked": true, "disabled": true, "contract_version": "v2",
		"created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-03T03:04:05Z"}`, string(out))
	require.Equal(t, v.NumField(), reflect.TypeOf(jsonview.Account{}).NumField(), "one JSON field per field of ledger.Account")

	bad, err = NonSnakeKeys([]byte(`[{"ID": 1, "ok_key": {"CredentialRef": 2}}]`))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"[0].ID", "[0].ok_key.CredentialRef"}, bad, "the check can fail")
}
