package ingest_test

import (
	"encoding/json"
	"os"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/events"
)

// rejectSchemaPath is the published schema of what ingest puts on atmost.rejected.<reason>.
const rejectSchemaPath = "../../../pkg/events/reject.schema.json"

// publishedRejects reads every message of ATMOST_REJECTS, requires each to validate against the
// published reject schema and to parse as an events.Reject, and returns them by the stream
// sequence of the message each refused.
func (e *env) publishedRejects() map[uint64]events.Reject {
	e.T.Helper()
	f, err := os.Open(rejectSchemaPath)
	require.NoError(e.T, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(e.T, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	require.NoError(e.T, c.AddResource("reject.schema.json", doc))
	schema, err := c.Compile("reject.schema.json")
	require.NoError(e.T, err)

	stream, err := e.JS.Stream(e.Ctx, events.RejectsStream)
	require.NoError(e.T, err)
	info, err := stream.Info(e.Ctx)
	require.NoError(e.T, err)
	out := map[uint64]events.Reject{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(e.Ctx, seq)
		require.NoError(e.T, err)
		var v any
		require.NoError(e.T, json.Unmarshal(m.Data, &v), "reject %d is JSON", seq)
		require.NoError(e.T, schema.Validate(v), "reject %d: %s", seq, m.Data)
		r, err := events.UnmarshalReject(m.Data)
		require.NoError(e.T, err)
		require.Equal(e.T, events.RejectSubject(r.Reason), m.Subject, "published on its reason's subject")
		require.Equal(e.T, r.ID, m.Header.Get("Nats-Msg-Id"), "its id is its message id")
		_, dup := out[r.StreamSeq]
		require.False(e.T, dup, "one reject per refused message")
		out[r.StreamSeq] = r
	}
	return out
}
