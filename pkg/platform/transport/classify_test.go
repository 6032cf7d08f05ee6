package transport_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// The table is complete and says nothing else: every case has a verdict, and no verdict
// belongs to a case outside the list.
func TestEveryCaseHasAVerdict(t *testing.T) {
	seen := map[transport.Case]bool{}
	for _, c := range transport.Cases() {
		require.False(t, seen[c], "case listed twice: %s", c)
		seen[c] = true
		v, ok := transport.Outcomes()[c]
		require.True(t, ok, "no verdict for %s", c)
		switch v.Result {
		case platform.Sent:
			require.Empty(t, v.Reason, c)
		case platform.NotSent:
			require.Contains(t, []platform.Reason{platform.ReasonConnectionFailed, platform.ReasonPlatformRejected}, v.Reason, c)
		case platform.Unknown:
			require.Equal(t, platform.ReasonSendUnknown, v.Reason, c)
		default:
			t.Fatalf("%s: result %q", c, v.Result)
		}
	}
	require.Len(t, transport.Outcomes(), len(transport.Cases()))
}

// Only two cases prove nothing was created; exactly one proves success.
func TestOnlyTwoCasesProveNotSent(t *testing.T) {
	var notSent, sent []transport.Case
	for _, c := range transport.Cases() {
		switch transport.Outcomes()[c].Result {
		case platform.NotSent:
			notSent = append(notSent, c)
		case platform.Sent:
			sent = append(sent, c)
		}
	}
	require.Equal(t, []transport.Case{transport.CaseNoConnection, transport.CaseDefinitive}, notSent)
	require.Equal(t, []transport.Case{transport.CaseSuccessWithID}, sent)
}

// The definitive case's text names the default list, so the documented table cannot drift from it.
func TestTheDefinitiveCaseNamesTheDefaultList(t *testing.T) {
	list := make([]string, len(transport.DefaultDefinitive()))
	for i, s := range transport.DefaultDefinitive() {
		list[i] = fmt.Sprint(s)
	}
	require.Contains(t, string(transport.CaseDefinitive), "(default "+strings.Join(list, ", ")+")")
	require.NotContains(t, transport.DefaultDefinitive(), 409, "409 often means the same key is still being processed")
	require.NotContains(t, transport.DefaultDefinitive(), 404)
	require.NotContains(t, transport.DefaultDefinitive(), 408)
}

func TestCaseOfFollowsTheTable(t *testing.T) {
	failed := errors.New("boom")
	connected := func(status int, body string) transport.Exchange {
		return transport.Exchange{Step: transport.StepResponse, Status: status, Body: []byte(body)}
	}
	for _, c := range []struct {
		name       string
		ex         transport.Exchange
		definitive []int
		want       transport.Case
		id         string
	}{
		{"refused", transport.Exchange{Step: transport.StepNone, Err: failed}, nil, transport.CaseNoConnection, ""},
		{"error once connected", transport.Exchange{Step: transport.StepConnected, Err: failed}, nil, transport.CaseErrorAfterConn, ""},
		{"error after the headers", transport.Exchange{Step: transport.StepWroteHeaders, Err: failed}, nil, transport.CaseErrorAfterConn, ""},
		{"error after the request", transport.Exchange{Step: transport.StepWroteRequest, Err: failed}, nil, transport.CaseErrorAfterConn, ""},
		{"error after the first response byte", transport.Exchange{Step: transport.StepResponse, Err: failed}, nil, transport.CaseErrorAfterConn, ""},
		{"200 with id", connected(200, `{"id":"a1"}`), nil, transport.CaseSuccessWithID, "a1"},
		{"201 with id", connected(201, `{"id":"a2"}`), nil, transport.CaseSuccessWithID, "a2"},
		{"299 with id", connected(299, `{"id":"a3"}`), nil, transport.CaseSuccessWithID, "a3"},
		{"2xx with an empty id", connected(201, `{"id":""}`), nil, transport.CaseSuccessWithoutID, ""},
		{"2xx without id", connected(201, `{}`), nil, transport.CaseSuccessWithoutID, ""},
		{"2xx with an empty body", connected(204, ``), nil, transport.CaseSuccessWithoutID, ""},
		{"2xx with a malformed body", connected(200, `{"id":`), nil, transport.CaseSuccessWithoutID, ""},
		{"2xx whose body could not be read", transport.Exchange{Step: transport.StepResponse, Status: 201, Body: []byte(`{"id":"a4"}`), Err: io.ErrUnexpectedEOF}, nil, transport.CaseSuccessWithoutID, ""},
		{"300", connected(300, ``), nil, transport.CaseRedirect, ""},
		{"307", connected(307, ``), nil, transport.CaseRedirect, ""},
		{"308", connected(308, ``), nil, transport.CaseRedirect, ""},
		{"a 3xx listed as definitive is still a redirect", connected(307, ``), []int{307}, transport.CaseRedirect, ""},
		{"a 2xx listed as definitive is still a success", connected(201, `{"id":"a5"}`), []int{201}, transport.CaseSuccessWithID, "a5"},
		{"400 default", connected(400, ``), transport.DefaultDefinitive(), transport.CaseDefinitive, ""},
		{"429 default", connected(429, ``), transport.DefaultDefinitive(), transport.CaseDefinitive, ""},
		{"404", connected(404, ``), transport.DefaultDefinitive(), transport.CaseOther4xx, ""},
		{"408", connected(408, ``), transport.DefaultDefinitive(), transport.CaseOther4xx, ""},
		{"409", connected(409, ``), transport.DefaultDefinitive(), transport.CaseOther4xx, ""},
		{"400 when the adapter lists only 422", connected(400, ``), []int{422}, transport.CaseOther4xx, ""},
		{"409 when the adapter lists it", connected(409, ``), []int{409}, transport.CaseDefinitive, ""},
		{"400 when the adapter lists none", connected(400, ``), nil, transport.CaseOther4xx, ""},
		{"500", connected(500, ``), transport.DefaultDefinitive(), transport.CaseServerError, ""},
		{"503", connected(503, ``), transport.DefaultDefinitive(), transport.CaseServerError, ""},
		{"599", connected(599, ``), nil, transport.CaseServerError, ""},
		{"101", connected(101, ``), nil, transport.CaseOtherStatus, ""},
		{"600", connected(600, ``), nil, transport.CaseOtherStatus, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, id := transport.CaseOf(c.ex, c.definitive, idAt)
			require.Equal(t, c.want, got)
			require.Equal(t, c.id, id)

			out := transport.Classify(c.ex, c.definitive, idAt)
			v := transport.Outcomes()[c.want]
			require.Equal(t, v.Result, out.Result)
			require.Equal(t, v.Reason, out.Reason)
			require.Equal(t, c.id, out.ObjectID)
			require.Equal(t, string(c.want), out.Detail["case"])
			require.Equal(t, string(c.ex.Step), out.Detail["step"])
			if c.ex.Status != 0 {
				require.Equal(t, c.ex.Status, out.Detail["status"])
			} else {
				require.NotContains(t, out.Detail, "status")
			}
			if c.ex.Err != nil {
				require.Equal(t, c.ex.Err.Error(), out.Detail["error"])
			}
		})
	}
}

// A 2xx whose id cannot be extracted is never a success: the platform may have created an
// object the ledger could not name.
func TestASuccessWithoutAnIDIsUnknown(t *testing.T) {
	ex := transport.Exchange{Step: transport.StepResponse, Status: 201, Body: []byte(`{"id":"x"}`)}
	for name, objectID := range map[string]func([]byte) (string, error){
		"extractor error": func([]byte) (string, error) { return "", errors.New("no id") },
		"empty id":        func([]byte) (string, error) { return "", nil },
		"id and an error": func([]byte) (string, error) { return "x", errors.New("no id") },
	} {
		out := transport.Classify(ex, nil, objectID)
		require.Equal(t, platform.Unknown, out.Result, name)
		require.Equal(t, platform.ReasonSendUnknown, out.Reason, name)
		require.Empty(t, out.ObjectID, name)
	}
}

// The evidence keeps a bounded excerpt of an error response, and none of a success's body.
func TestClassifyKeepsABoundedResponseExcerpt(t *testing.T) {
	long := strings.Repeat("x", 2000)
	out := transport.Classify(transport.Exchange{Step: transport.StepResponse, Status: 500, Body: []byte(long)}, nil, idAt)
	excerpt, ok := out.Detail["response"].(string)
	require.True(t, ok)
	require.True(t, strings.HasPrefix(excerpt, strings.Repeat("x", 512)+"..."), excerpt)
	require.Contains(t, excerpt, "(2000 bytes)")

	out = transport.Classify(transport.Exchange{Step: transport.StepResponse, Status: 201, Body: []byte(`{"id":"a","secret":"s"}`)}, nil, idAt)
	require.NotContains(t, out.Detail, "response")
}

const (
	tableStart = "<!-- transport-table:start -->\n"
	tableEnd   = "<!-- transport-table:end -->"
)

// markedTable returns what doc holds between the transport table's markers; found is false
// when the start marker is absent.
func markedTable(doc string) (table string, found bool, err error) {
	i := strings.Index(doc, tableStart)
	if i < 0 {
		return "", false, nil
	}
	if strings.Count(doc, tableStart) > 1 {
		return "", true, errors.New("two transport tables")
	}
	rest := doc[i+len(tableStart):]
	j := strings.Index(rest, tableEnd)
	if j < 0 {
		return "", true, errors.New("the start marker without the end marker")
	}
	return rest[:j], true, nil
}

// The design's error -> outcome table is Table(), between its markers.
func TestTheDesignCarriesTheTransportTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "design.md"))
	require.NoError(t, err)
	table, found, err := markedTable(string(b))
	require.True(t, found, "docs/design.md has no %s marker: put transport.Table() between the markers", strings.TrimSpace(tableStart))
	require.NoError(t, err, "docs/design.md")
	require.Equal(t, transport.Table(), table, "the transport table of docs/design.md differs from transport.Table()")
}

// The check above can fail: it finds the table between the markers and notices any change.
func TestTheTableCheckNoticesDifferences(t *testing.T) {
	wrap := func(table string) string { return "# x\n\n" + tableStart + table + tableEnd + "\n\nmore\n" }
	got, found, err := markedTable(wrap(transport.Table()))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, transport.Table(), got)

	edited := strings.Replace(transport.Table(), "`not_sent`", "`unknown`", 1)
	got, _, err = markedTable(wrap(edited))
	require.NoError(t, err)
	require.NotEqual(t, transport.Table(), got)

	_, found, err = markedTable("# x\n" + tableStart + transport.Table())
	require.True(t, found)
	require.Error(t, err)
	_, _, err = markedTable(wrap(transport.Table()) + wrap(transport.Table()))
	require.Error(t, err)
	_, found, _ = markedTable("# x\n")
	require.False(t, found)
}

func TestTableListsEveryCaseInOrder(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(transport.Table(), "\n"), "\n")
	require.Equal(t, "| case | outcome | reason |", lines[0])
	require.Equal(t, "|---|---|---|", lines[1])
	require.Len(t, lines, 2+len(transport.Cases()))
	for k, c := range transport.Cases() {
		v := transport.Outcomes()[c]
		row := lines[2+k]
		require.True(t, strings.HasPrefix(row, "| "+string(c)+" | `"+string(v.Result)+"` | "), row)
		if v.Reason != "" {
			require.True(t, strings.HasSuffix(row, " | `"+string(v.Reason)+"` |"), row)
		}
		require.Equal(t, 4, strings.Count(row, "|"), "a case's text must not break the table: %s", row)
	}
}

// The tables are the package's: a caller that writes into what it was given changes its copy,
// never the next caller's.
func TestTheTablesAreCopies(t *testing.T) {
	cases := transport.Cases()
	cases[0] = transport.CaseOtherStatus
	require.Equal(t, transport.CaseNoConnection, transport.Cases()[0])

	outcomes := transport.Outcomes()
	outcomes[transport.CaseServerError] = transport.Verdict{Result: platform.NotSent, Reason: platform.ReasonPlatformRejected}
	require.Equal(t, platform.Unknown, transport.Outcomes()[transport.CaseServerError].Result)

	definitive := transport.DefaultDefinitive()
	definitive[0] = 200
	require.Equal(t, 400, transport.DefaultDefinitive()[0])
}
