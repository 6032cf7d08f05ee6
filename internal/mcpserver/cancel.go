package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
)

// Canceller is what the cancel tool calls: client.Client's Cancel, which parks an intent
// cancelled if and only if it is not yet authorized. An interface, so that the tool's scoping
// is tested without a ledger.
type Canceller interface {
	Cancel(ctx context.Context, account string, key identity.DeliveryKey) (CancelResult, error)
}

// CancelResult is client.CancelResult: whether the intent is parked cancelled (by this request
// or an earlier one), and its state either way.
type CancelResult = client.CancelResult

// CancelOutput is what the cancel tool answers.
type CancelOutput struct {
	DeliveryKey string `json:"delivery_key"`
	Account     string `json:"account"`
	Cancelled   bool   `json:"cancelled"        jsonschema:"true: parked cancelled, it will never be sent; false: too late, state says where it is"`
	State       string `json:"state"            jsonschema:"the intent's state after the request"`
	Reason      string `json:"reason,omitempty"`
	Seq         int64  `json:"seq,omitempty"`
}

func cancelTool(srv *mcp.Server, sc scope, c Canceller) {
	mcp.AddTool(srv, &mcp.Tool{Name: ToolCancel, Title: "Cancel an intent not yet sent", Description: cancelAbout,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: t(true), OpenWorldHint: t(false)}},
		func(ctx context.Context, req *mcp.CallToolRequest, in KeyInput) (*mcp.CallToolResult, CancelOutput, error) {
			key, err := keyOf(req, sc, in)
			if err != nil {
				return nil, CancelOutput{}, err
			}
			r, err := c.Cancel(ctx, in.Account, key)
			if err != nil {
				return nil, CancelOutput{}, statusError(err)
			}
			return nil, CancelOutput{DeliveryKey: r.Key.String(), Account: r.Account, Cancelled: r.Cancelled,
				State: string(r.State), Reason: string(r.Reason), Seq: r.Seq}, nil
		})
}
