package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// MaxRejectRaw is how many bytes of a refused message the ledger keeps; the full size is
// recorded beside them.
const MaxRejectRaw = 64 << 10

// Rejection is one refused input message.
type Rejection struct {
	Reason  string // a rejection reason of pkg/identity (malformed_json, unknown_account, ...)
	Detail  string
	Subject string
	// Stream and StreamSeq name the message in JetStream; a redelivered message is stored once.
	Stream    string
	StreamSeq int64
	Headers   map[string][]string
	Raw       []byte
}

// Reject stores refused input, in one transaction, and returns how many rows were new.
func (l *Ledger) Reject(ctx context.Context, rs []Rejection) (int64, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	var p dbsqlc.RejectsInsertParams
	for _, r := range rs {
		if r.Reason == "" {
			return 0, fmt.Errorf("reject: a rejection needs a reason")
		}
		headers, err := json.Marshal(r.Headers)
		if err != nil {
			return 0, fmt.Errorf("reject: headers: %w", err)
		}
		if r.Headers == nil {
			headers = []byte("{}")
		}
		raw := r.Raw
		if len(raw) > MaxRejectRaw {
			raw = raw[:MaxRejectRaw]
		}
		p.Reasons = append(p.Reasons, r.Reason)
		p.Details = append(p.Details, r.Detail)
		p.Subjects = append(p.Subjects, r.Subject)
		p.Streams = append(p.Streams, r.Stream)
		p.StreamSeqs = append(p.StreamSeqs, r.StreamSeq)
		p.Headers = append(p.Headers, string(headers))
		p.Raws = append(p.Raws, raw)
		p.RawSizes = append(p.RawSizes, int32(len(r.Raw)))
		p.RawTruncateds = append(p.RawTruncateds, len(raw) < len(r.Raw))
	}
	var n int64
	err := l.inTx(ctx, "reject", func(q *dbsqlc.Queries) (err error) {
		n, err = q.RejectsInsert(ctx, p)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reject %d messages: %w", len(rs), err)
	}
	return n, nil
}
