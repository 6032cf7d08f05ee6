package transport_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform/transport"
)

// headOf sends one request through a client and returns the header lines the server read,
// as they came off the socket.
func headOf(t *testing.T, header http.Header, body string) []string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	lines := make(chan []string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			lines <- nil
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		var head []string
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
			head = append(head, strings.TrimRight(line, "\r\n"))
		}
		_, _ = conn.Write([]byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"))
		lines <- head
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ex := transport.New(transport.Config{}).Do(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/post", header, []byte(body))
	require.NoError(t, ex.Err)
	return <-lines
}

// A header is sent as given when its names are canonical, and with each name made canonical
// otherwise: a Host or a Content-Length given under another spelling never goes out beside
// the ones net/http writes.
func TestAHeaderGoesOutWithCanonicalNamesOnly(t *testing.T) {
	t.Parallel()
	for _, h := range []http.Header{
		{"Content-Length": {"1"}, "Host": {"evil"}, "X-Tenant": {"42"}},
		{"content-length": {"1"}, "host": {"evil"}, "x-tenant": {"42"}},
	} {
		head := headOf(t, h, "hello")
		var lengths, hosts []string
		for _, line := range head[1:] {
			name, value, _ := strings.Cut(line, ": ")
			require.Equal(t, http.CanonicalHeaderKey(name), name, "a name not canonical went out: %q", line)
			switch strings.ToLower(name) {
			case "content-length":
				lengths = append(lengths, value)
			case "host":
				hosts = append(hosts, value)
			}
		}
		require.Equal(t, []string{"5"}, lengths, "%v", head)
		require.Len(t, hosts, 1, "%v", head)
		require.NotEqual(t, "evil", hosts[0])
		require.Contains(t, head, "X-Tenant: 42")
	}
}
