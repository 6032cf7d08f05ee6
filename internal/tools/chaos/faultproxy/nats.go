package faultproxy

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// natsPump forwards one direction of a NATS connection, operation by operation: a control line
// up to CRLF, and for a publish (PUB, HPUB, from the client) or a message (MSG, HMSG, from the
// server) the payload its last field sizes, with its CRLF. The faults fall on publishes and
// messages; everything else (INFO, CONNECT, SUB, PING, PONG) passes as it came.
func (c *conn) natsPump(br *bufio.Reader, w *writer, fromClient bool) error {
	dir, cut := toClient, CutAfterMessage
	if fromClient {
		dir, cut = toServer, CutAfterPublish
	}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return err
		}
		msg, f := line, Fault("")
		fields := strings.Fields(string(line))
		if len(fields) > 0 && carriesPayload(strings.ToUpper(fields[0]), fromClient) {
			size, err := strconv.Atoi(fields[len(fields)-1])
			if err != nil || size < 0 {
				return fmt.Errorf("faultproxy: a NATS operation without its size: %q", line)
			}
			payload, err := readFull(br, size+2)
			if err != nil {
				return err
			}
			msg = append(line, payload...)
			f = c.draw(dir, cut, Stall, Reset, Delay)
		}
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

// carriesPayload reports whether op is followed by a payload in its direction.
func carriesPayload(op string, fromClient bool) bool {
	if fromClient {
		return op == "PUB" || op == "HPUB"
	}
	return op == "MSG" || op == "HMSG"
}
