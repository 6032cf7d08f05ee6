package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"
)

// The startup requests that carry a code instead of a protocol version.
const (
	cancelRequest = 80877102
	sslRequest    = 80877103
	gssRequest    = 80877104
)

// kind is what a statement does to the transaction.
type kind int

const (
	other kind = iota
	begin
	commit
	rollback
)

// classify reads a query's text: a simple query may hold several statements, and it is a
// commit when its last one is (a whole transaction in one message: its COMMIT is what matters).
func classify(query string) kind {
	var stmts []string
	for s := range strings.SplitSeq(query, ";") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			stmts = append(stmts, s)
		}
	}
	if len(stmts) == 0 {
		return other
	}
	first, last := stmts[0], stmts[len(stmts)-1]
	switch {
	case last == "commit" || last == "end" || strings.HasPrefix(last, "commit "):
		return commit
	case last == "rollback" || last == "abort" || strings.HasPrefix(last, "rollback "):
		return rollback
	case strings.HasPrefix(first, "begin") || strings.HasPrefix(first, "start transaction"):
		return begin
	}
	return other
}

// frontend forwards what the client sends PostgreSQL: the startup (an SSL or GSS encryption
// request answered "no" here, so that the rest passes in the clear and can be read), then its
// typed messages, each the type byte and an int32 length. A statement is run by a simple Query
// or by the Execute of a portal, bound from a statement parsed earlier, named or not (pgx
// parses a statement once and runs it by name afterwards; a pipelined batch sends Parse, Bind,
// Describe and Execute for every statement, then one Sync): the proxy follows the names to
// know the text an Execute runs.
func (c *conn) frontend(br *bufio.Reader, w *writer) error {
	for {
		hdr, err := readFull(br, 4)
		if err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr))
		if n < 8 || n > 1<<20 {
			return fmt.Errorf("faultproxy: a startup message of %d bytes", n)
		}
		body, err := readFull(br, n-4)
		if err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(body)
		if code == sslRequest || code == gssRequest {
			if _, err := c.client.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		w.buf = append(append(w.buf, hdr...), body...)
		if err := w.flush(); err != nil {
			return err
		}
		if code == cancelRequest {
			_, err := io.Copy(c.server, br)
			return err
		}
		break
	}
	statements, portals := map[string]kind{}, map[string]kind{}
	inTx := false
	for {
		head, err := readFull(br, 5)
		if err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return fmt.Errorf("faultproxy: a message %q of length %d", head[0], n)
		}
		body, err := readFull(br, n-4)
		if err != nil {
			return err
		}
		var f Fault
		switch head[0] {
		case 'Q':
			query, _ := cstring(body)
			f = c.statementFault(classify(query), &inTx)
		case 'P':
			name, rest := cstring(body)
			query, _ := cstring(rest)
			statements[name] = classify(query)
		case 'B':
			portal, rest := cstring(body)
			stmt, _ := cstring(rest)
			portals[portal] = statements[stmt]
		case 'E':
			portal, _ := cstring(body)
			f = c.statementFault(portals[portal], &inTx)
		}
		msg := append(head, body...)
		if f != "" {
			if err := w.apply(f, msg); err != nil {
				return err
			}
		} else {
			w.buf = append(w.buf, msg...)
		}
		if err := w.flushIfIdle(br); err != nil {
			return err
		}
	}
}

// cutAtCommitWithin bounds the wait for the server's answer to a COMMIT that CutAfterCommit
// cuts after: past it the connection is cut all the same.
const cutAtCommitWithin = 10 * time.Second

// backend forwards what PostgreSQL sends the client, message by message (the type byte and an
// int32 length, from the first: the proxy answered the encryption requests itself). While a
// COMMIT is to be cut after, it drops everything up to the COMMIT's answer (its
// CommandComplete, COMMIT or ROLLBACK, or the ReadyForQuery after it) and cuts there.
func (c *conn) backend(br *bufio.Reader, w *writer) error {
	for {
		head, err := readFull(br, 5)
		if err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return fmt.Errorf("faultproxy: a message %q of length %d", head[0], n)
		}
		body, err := readFull(br, n-4)
		if err != nil {
			return err
		}
		if c.cutAtCommit.Load() {
			tag, _ := cstring(body)
			if head[0] == 'Z' || head[0] == 'C' && (strings.HasPrefix(tag, "COMMIT") || strings.HasPrefix(tag, "ROLLBACK")) {
				c.close(false)
				return errCut
			}
			continue
		}
		w.buf = append(append(w.buf, head...), body...)
		if err := w.flushIfIdle(br); err != nil {
			return err
		}
	}
}

// statementFault draws the fault for a statement about to run, and follows the transaction:
// the commit faults at a COMMIT, a reset at a statement inside a transaction, a delay anywhere.
func (c *conn) statementFault(k kind, inTx *bool) Fault {
	switch k {
	case commit:
		*inTx = false
		return c.draw(toServer, CutAfterCommit, CutBeforeCommit, StallBeforeCommit, StallAfterCommit, Delay)
	case begin:
		*inTx = true
	case rollback:
		*inTx = false
	default:
		if *inTx {
			return c.draw(toServer, Reset, Delay)
		}
	}
	return c.draw(toServer, Delay)
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}
