package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

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
	// Raw is the message's body: the ledger keeps its first MaxRejectRaw bytes, its size and its
	// SHA-256.
	Raw []byte
	// DigestOnly keeps none of Raw, only its size and SHA-256: the record of a message whose
	// content the database would not take.
	DigestOnly bool
}

// storedTextPrefix marks a stored text that is the base64 of the original bytes.
const storedTextPrefix = "base64:"

// StoredText is how the rejects table holds a refused message's subject, its detail and each of
// its header keys and values, whatever their bytes: as they are when they are valid UTF-8
// without NUL (PostgreSQL takes neither invalid UTF-8 nor NUL in text or JSONB), otherwise
// "base64:" and their standard base64. A text that itself begins with "base64:" is encoded too,
// so every stored text reads back as exactly the bytes that arrived (ParseStoredText).
func StoredText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, storedTextPrefix) {
		return s
	}
	return storedTextPrefix + base64.StdEncoding.EncodeToString([]byte(s))
}

// ParseStoredText returns the bytes a StoredText stands for. A "base64:" text that does not
// decode can only predate the encoding, and is returned as it is.
func ParseStoredText(s string) string {
	rest, ok := strings.CutPrefix(s, storedTextPrefix)
	if !ok {
		return s
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return s
	}
	return string(b)
}

// storedHeaders is the JSON the headers column holds: every key and value as StoredText.
func storedHeaders(h map[string][]string) ([]byte, error) {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		stored := make([]string, len(vs))
		for i, v := range vs {
			stored[i] = StoredText(v)
		}
		out[StoredText(k)] = stored
	}
	return json.Marshal(out)
}

func parseStoredHeaders(b []byte) (map[string][]string, error) {
	var stored map[string][]string
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(stored))
	for k, vs := range stored {
		values := make([]string, len(vs))
		for i, v := range vs {
			values[i] = ParseStoredText(v)
		}
		out[ParseStoredText(k)] = values
	}
	return out, nil
}

// Reject stores refused input, in one transaction, and returns how many rows were new. An
// error for which Permanent is true means the database refused the content of some rejection;
// the caller may store them one by one to find it.
func (l *Ledger) Reject(ctx context.Context, rs []Rejection) (int64, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	var p dbsqlc.RejectsInsertParams
	for _, r := range rs {
		if r.Reason == "" {
			return 0, fmt.Errorf("reject: a rejection needs a reason")
		}
		headers, err := storedHeaders(r.Headers)
		if err != nil {
			return 0, fmt.Errorf("reject: headers: %w", err)
		}
		raw := r.Raw
		switch {
		case r.DigestOnly:
			raw = []byte{}
		case len(raw) > MaxRejectRaw:
			raw = raw[:MaxRejectRaw]
		}
		digest := sha256.Sum256(r.Raw)
		p.Reasons = append(p.Reasons, r.Reason)
		p.Details = append(p.Details, StoredText(r.Detail))
		p.Subjects = append(p.Subjects, StoredText(r.Subject))
		p.Streams = append(p.Streams, r.Stream)
		p.StreamSeqs = append(p.StreamSeqs, r.StreamSeq)
		p.Headers = append(p.Headers, string(headers))
		p.Raws = append(p.Raws, raw)
		p.RawSizes = append(p.RawSizes, int32(len(r.Raw)))
		p.RawTruncateds = append(p.RawTruncateds, len(raw) < len(r.Raw))
		p.RawSha256s = append(p.RawSha256s, digest[:])
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
