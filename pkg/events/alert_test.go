package events_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// Every kind of alert, as the sweeper writes it, is what alert.schema.json says, and the schema
// refuses what is not one.
func TestAlertsMatchThePublishedSchema(t *testing.T) {
	f, err := os.Open("alert.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("alert.schema.json", doc))
	schema, err := c.Compile("alert.schema.json")
	require.NoError(t, err)

	key, err := identity.DeliveryKeyFromBytes(make([]byte, 32))
	require.NoError(t, err)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, a := range []events.Alert{
		{V: 1, ID: "alert:health:0b0e6c8e-8a36-4c1e-9d6a-1f1f1f1f1f1f", Kind: events.AlertHeld, Account: "acct-1", At: at,
			State: "holding", From: "serving", Cause: "platform_unavailable", Actor: "dispatcher", NextProbe: "2026-01-02T03:04:10Z"},
		{V: 1, ID: "alert:health:0b0e6c8e-8a36-4c1e-9d6a-1f1f1f1f1f2f", Kind: events.AlertHealed, Account: "acct-1", At: at,
			State: "serving", From: "holding", Actor: "alice", Why: "rotated"},
		{V: 1, ID: "alert:parked:" + key.String() + ":4", Kind: events.AlertParked, Account: "acct-1", At: at, DeliveryKey: &key, Reason: "operator_parked"},
	} {
		b, err := json.Marshal(a)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		require.NoError(t, schema.Validate(v), string(b))
		require.Equal(t, "atmost.alert."+a.Kind+"."+identity.AccountToken("acct-1"), a.Subject())
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		m["kind"] = "tripped"
		require.Error(t, schema.Validate(m), "an unknown kind")
	}
}
