package ingest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// rawProducer speaks the NATS protocol itself, as a producer in any language may: it sends
// subjects and header blocks that nats.go refuses to build (a NUL in a header key, a block
// that does not parse, a subject of any bytes) and reads JetStream's answer.
type rawProducer struct {
	addr  string
	conn  net.Conn
	r     *bufio.Reader
	inbox string
}

func newRawProducer(t testing.TB, natsURL string) *rawProducer {
	t.Helper()
	u, err := url.Parse(natsURL)
	require.NoError(t, err)
	p := &rawProducer{addr: u.Host, inbox: "_RAW." + strconv.FormatInt(time.Now().UnixNano(), 36)}
	t.Cleanup(p.close)
	return p
}

func (p *rawProducer) close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}

func (p *rawProducer) dial() error {
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		return err
	}
	p.conn, p.r = c, bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.r.ReadString('\n'); err != nil { // INFO
		return err
	}
	_, err = fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true,\"protocol\":1}\r\nSUB %s 1\r\n", p.inbox)
	return err
}

// published is JetStream's answer to one publish: the sequence it stored the message at, or
// why nothing was stored (a refusal by JetStream or by the server, or a duplicate Nats-Msg-Id).
type published struct {
	Seq     uint64
	Refusal string
}

// publish sends one message (HPUB when header is not nil) and waits for the answer. The
// server closes the connection after some refusals; the next publish dials again.
func (p *rawProducer) publish(t testing.TB, subject string, header, body []byte) published {
	t.Helper()
	if p.conn == nil {
		require.NoError(t, p.dial())
	}
	_ = p.conn.SetDeadline(time.Now().Add(10 * time.Second))
	var frame []byte
	if header == nil {
		frame = fmt.Appendf(nil, "PUB %s %s %d\r\n", subject, p.inbox, len(body))
	} else {
		frame = fmt.Appendf(nil, "HPUB %s %s %d %d\r\n", subject, p.inbox, len(header), len(header)+len(body))
		frame = append(frame, header...)
	}
	frame = append(append(frame, body...), "\r\n"...)
	if _, err := p.conn.Write(frame); err != nil {
		p.close()
		return published{Refusal: "write: " + err.Error()}
	}
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			p.close()
			return published{Refusal: "read: " + err.Error()}
		}
		line = strings.TrimRight(line, "\r\n")
		args := strings.Fields(line)
		switch {
		case len(args) == 0:
		case args[0] == "PING":
			_, _ = io.WriteString(p.conn, "PONG\r\n")
		case args[0] == "-ERR":
			p.close()
			return published{Refusal: line}
		case args[0] == "MSG" || args[0] == "HMSG":
			hdrLen, total := 0, 0
			if args[0] == "MSG" {
				total, _ = strconv.Atoi(args[len(args)-1])
			} else {
				hdrLen, _ = strconv.Atoi(args[len(args)-2])
				total, _ = strconv.Atoi(args[len(args)-1])
			}
			payload := make([]byte, total+2)
			if _, err := io.ReadFull(p.r, payload); err != nil {
				p.close()
				return published{Refusal: "read: " + err.Error()}
			}
			if hdrLen > 0 {
				h, _ := nats.DecodeHeadersMsg(payload[:hdrLen])
				return published{Refusal: "status " + h.Get("Status") + " " + h.Get("Description")}
			}
			var ack struct {
				Seq       uint64 `json:"seq"`
				Duplicate bool   `json:"duplicate"`
				Error     *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(payload[hdrLen:total], &ack); err != nil {
				return published{Refusal: "answer: " + err.Error()}
			}
			switch {
			case ack.Error != nil:
				return published{Refusal: ack.Error.Description}
			case ack.Duplicate:
				return published{Refusal: "duplicate"}
			}
			return published{Seq: ack.Seq}
		}
	}
}

// headerBlock is a NATS header block with the given lines, as the protocol carries it.
func headerBlock(lines ...string) []byte {
	b := []byte("NATS/1.0\r\n")
	for _, l := range lines {
		b = append(append(b, l...), "\r\n"...)
	}
	return append(b, "\r\n"...)
}
