package webhook_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestTheBodyTemplateReplacesExactPlaceholders(t *testing.T) {
	ad := open(t, `{"url":"https://example.org/hook","confirm":"response","body_template":{
		"k":"$key",
		"nested":{"list":["$account","$action",{"t":"$target"}],"text":"$text"},
		"req":"$request",
		"literal":"key: $key",
		"price":"$5",
		"dollar":"$",
		"n":12,"b":true,"z":null,
		"$key":"object keys stay"}}`, "")
	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	key := deliveryKey(t).String()
	require.Equal(t, `{"$key":"object keys stay","b":true,"dollar":"$","k":"`+key+`","literal":"key: $key","n":12,`+
		`"nested":{"list":["acct-1","post",{"t":"feed/7"}],"text":"hello"},"price":"$5","req":{"text":"hello"},"z":null}`,
		string(p.Body), "placeholders replaced, other strings untouched, canonical JSON")

	var body map[string]any
	require.NoError(t, json.Unmarshal(p.Body, &body))
	require.Equal(t, map[string]any{"text": "hello"}, body["req"], "$request is the request object, not a string")

	again, err := ad.Prepare(request(t))
	require.NoError(t, err)
	require.Equal(t, p.Body, again.Body)
	require.Equal(t, p.Hash, again.Hash, "the same request prepares the same bytes")
}

func TestTheDefaultTemplate(t *testing.T) {
	p, err := open(t, `{"url":"https://example.org/hook","confirm":"response"}`, "").Prepare(request(t))
	require.NoError(t, err)
	require.Equal(t, `{"account":"acct-1","action":"post","delivery_key":"`+deliveryKey(t).String()+
		`","request":{"text":"hello"},"target":"feed/7"}`, string(p.Body))
}

func TestTheTemplateOutputIsCanonical(t *testing.T) {
	r := request(t)
	r.Text = "<a & b> é"
	r.Request = json.RawMessage(`{"text":"<a & b> é","b":1}`)
	p, err := open(t, `{"url":"https://example.org/hook","confirm":"response","body_template":{"z":"$text","a":["$request"]}}`, "").Prepare(r)
	require.NoError(t, err)
	require.Equal(t, `{"a":[{"b":1,"text":"<a & b> é"}],"z":"<a & b> é"}`, string(p.Body))
	canon, err := identity.CanonicalJSON(p.Body)
	require.NoError(t, err)
	require.Equal(t, canon, p.Body)
}

func TestPrepareSetsTheIdempotencyKeyAndTheWireRequest(t *testing.T) {
	ad := open(t, `{"url":"https://example.org/hook","confirm":"response","method":"PUT","headers":{"x-tenant":"42"}}`, "")
	r := request(t)
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, "PUT", p.Method)
	require.Equal(t, "https://example.org/hook", p.URL)
	require.Equal(t, map[string][]string{
		"Idempotency-Key": {r.Key.String()},
		"Content-Type":    {"application/json"},
		"X-Tenant":        {"42"},
	}, p.Header)
	require.Equal(t, platform.NewPrepared(r, p.Method, p.URL, p.Header, p.Body).Hash, p.Hash)
	require.Equal(t, r, p.Request)

	// The hash follows the delivery key: another intent is another wire request.
	other := r
	other.Key, err = identity.ParseDeliveryKey("dk1:" + strings.Repeat("cd", 32))
	require.NoError(t, err)
	q, err := ad.Prepare(other)
	require.NoError(t, err)
	require.NotEqual(t, p.Hash, q.Hash)
}

func TestPrepareRefusesARequestItCannotRender(t *testing.T) {
	ad := open(t, `{"url":"https://example.org/hook","confirm":"response"}`, "")
	r := request(t)
	r.Key = identity.DeliveryKey{}
	_, err := ad.Prepare(r)
	require.ErrorContains(t, err, "no delivery key")

	r = request(t)
	r.Account = "acct-2"
	_, err = ad.Prepare(r)
	require.ErrorContains(t, err, `for account "acct-2"`)

	r = request(t)
	r.Request = nil
	_, err = ad.Prepare(r)
	require.ErrorContains(t, err, "$request")
	_, err = open(t, `{"url":"https://example.org/hook","confirm":"response","body_template":{"t":"$text"}}`, "").Prepare(r)
	require.NoError(t, err, "a template without $request does not need it")
}

func TestSettingsAreValidated(t *testing.T) {
	for _, c := range []struct{ settings, want string }{
		{``, "url is required"},
		{`{}`, "url is required"},
		{`null`, "not a JSON object"},
		{`[]`, "not a JSON object"},
		{`{"url":"https://x.org","extra":1}`, `unknown field "extra"`},
		{`{"url":"https://x.org","url":"https://y.org"}`, "duplicate"},
		{`{"url":"https://x.org"} {}`, "trailing"},
		{`{"url":"ftp://x.org/hook"}`, "want an http or https URL"},
		{`{"url":"/hook"}`, "want an http or https URL"},
		{`{"url":"https:///hook"}`, "no host"},
		{`{"url":"https://user:pw@x.org/hook"}`, "user information"},
		{`{"url":"https://x.org/hook#part"}`, "fragment"},
		{`{"url":"https://x.org","method":"GET"}`, "must not be a read"},
		{`{"url":"https://x.org","method":"HEAD"}`, "must not be a read"},
		{`{"url":"https://x.org","method":"post"}`, "want POST, PUT, PATCH or DELETE"},
		{`{"url":"https://x.org","method":"OPTIONS"}`, "want POST, PUT, PATCH or DELETE"},
		{`{"url":"https://x.org","headers":{"Authorization":"Bearer x"}}`, "credentials come only from the account's credential reference"},
		{`{"url":"https://x.org","headers":{"authorization":"Bearer x"}}`, "credentials come only from the account's credential reference"},
		{`{"url":"https://x.org","headers":{"Cookie":"s=1"}}`, "credentials come only"},
		{`{"url":"https://x.org","headers":{"Proxy-Authorization":"x"}}`, "credentials come only"},
		{`{"url":"https://x.org","headers":{"Idempotency-Key":"k"}}`, "set by the adapter"},
		{`{"url":"https://x.org","headers":{"content-type":"text/plain"}}`, "set by the adapter"},
		{`{"url":"https://x.org","headers":{"Host":"y.org"}}`, "set by the adapter"},
		{`{"url":"https://x.org","headers":{"Bad Name":"1"}}`, "not a valid header name"},
		{`{"url":"https://x.org","headers":{"X-A":"1\r\nX-B: 2"}}`, "control character"},
		{`{"url":"https://x.org","headers":{"X-A":"1","x-a":"2"}}`, "given twice"},
		{`{"url":"https://x.org","credential_header":"Bad Header"}`, "not a valid header name"},
		{`{"url":"https://x.org","credential_header":"Content-Type"}`, "sets that header itself"},
		{`{"url":"https://x.org","credential_prefix":"Bearer "}`, "credential_prefix is set but credential_header is not"},
		{`{"url":"https://x.org","credential_header":"X-Api-Key","headers":{"x-api-key":"1"}}`, "is the credential_header"},
		{`{"url":"https://x.org","body_template":{"a":"$kye"}}`, `unknown placeholder "$kye" at /a`},
		{`{"url":"https://x.org","body_template":["$KEY"]}`, `unknown placeholder "$KEY" at /0`},
		{`{"url":"https://x.org","body_template":"$typo"}`, "at the top level"},
		{`{"url":"https://x.org","object_id_pointer":"id"}`, "object_id_pointer: JSON pointer \"id\" must start with /"},
		{`{"url":"https://x.org","object_id_pointer":"/a~2"}`, "~ must be followed by 0 or 1"},
		{`{"url":"https://x.org","definitive_statuses":[500]}`, "500 is not a 4xx"},
		{`{"url":"https://x.org","definitive_statuses":[201]}`, "201 is not a 4xx"},
		{`{"url":"https://x.org","definitive_statuses":[400,400]}`, "400 is listed twice"},
		{`{"url":"https://x.org","readback_url":"https://x.org/objects"}`, "must contain {id}"},
		{`{"url":"https://x.org","readback_url":"file:///{id}"}`, "want an http or https URL"},
		{`{"url":"https://x.org","readback_text_pointer":"/body"}`, "readback_text_pointer is set but readback_url is not"},
		{`{"url":"https://x.org","readback_url":"https://x.org/{id}","readback_text_pointer":"body"}`, "readback_text_pointer"},
		{`{"url":"https://x.org","status_url":"https://x.org/status"}`, "must contain {key}"},
		{`{"url":"https://x.org","reconcile_delay":"soon"}`, "reconcile_delay"},
		{`{"url":"https://x.org","reconcile_delay":"-1s"}`, "must be positive"},
		{`{"url":"https://x.org","reconcile_delay":"0s"}`, "must be positive"},
		{`{"url":"https://x.org","confirm":"yes"}`, `confirm "yes": the one value is "response"`},
		{`{"url":"https://x.org","confirm":"response","readback_url":"https://x.org/{id}"}`, "both set"},
	} {
		_, err := webhook.Open(platform.Account{ID: "acct-1", Platform: webhook.Name, Settings: json.RawMessage(c.settings)})
		require.ErrorIs(t, err, webhook.ErrInvalidSettings, c.settings)
		require.ErrorContains(t, err, c.want, c.settings)
	}
}

func TestTheCredentialReferenceMustMatchTheCredentialHeader(t *testing.T) {
	withHeader := `{"url":"https://x.org","confirm":"response","credential_header":"Authorization","credential_prefix":"Bearer "}`
	openWith := func(settings, ref string) error {
		_, err := webhook.Open(platform.Account{ID: "acct-1", Platform: webhook.Name, Settings: json.RawMessage(settings), CredentialRef: ref})
		return err
	}
	t.Setenv(secretEnv, secret)
	require.NoError(t, openWith(withHeader, "env:"+secretEnv))
	require.NoError(t, openWith(`{"url":"https://x.org","confirm":"response"}`, ""))

	err := openWith(`{"url":"https://x.org","confirm":"response"}`, "env:"+secretEnv)
	require.ErrorIs(t, err, webhook.ErrInvalidSettings)
	require.ErrorContains(t, err, "credential_header is not set")

	err = openWith(withHeader, "")
	require.ErrorIs(t, err, webhook.ErrInvalidSettings)
	require.ErrorContains(t, err, "no credential reference")

	err = openWith(withHeader, "env:ATMOST_WEBHOOK_TEST_NEVER_SET")
	require.ErrorIs(t, err, platform.ErrNoCredential)

	err = openWith(withHeader, "vault:acct-1")
	require.ErrorContains(t, err, "env:NAME or file:/path")

	t.Setenv(secretEnv, "")
	err = openWith(withHeader, "env:"+secretEnv)
	require.ErrorContains(t, err, "is empty")

	t.Setenv(secretEnv, secret+"\r\nX-Injected: 1")
	err = openWith(withHeader, "env:"+secretEnv)
	require.ErrorContains(t, err, "control character")
	require.NotContains(t, err.Error(), secret)
}

func TestCapabilitiesFollowTheSettings(t *testing.T) {
	require.Equal(t, platform.Capabilities{
		StatusLookup:        false,
		DefinitiveStatuses:  transport.DefaultDefinitive(),
		ContractVersion:     "",
		ReconcileDelay:      30 * time.Second,
		ConfirmedByResponse: true,
		UnavailableStatuses: []int{429},
		AuthStatuses:        []int{401, 403},
	}, open(t, `{"url":"https://x.org","confirm":"response"}`, "").Capabilities())
	require.False(t, open(t, `{"url":"https://x.org","readback_url":"https://x.org/{id}"}`, "").Capabilities().ConfirmedByResponse,
		"only an explicit confirm trusts the response")

	require.Equal(t, platform.Capabilities{
		StatusLookup:       true,
		DefinitiveStatuses: []int{400, 409, 422},
		ContractVersion:    "v3",
		ReconcileDelay:     2 * time.Minute,
		// Of the default unavailable and auth statuses, only the definitive ones are declared.
		UnavailableStatuses: []int{},
		AuthStatuses:        []int{},
	}, open(t, `{"url":"https://x.org","status_url":"https://x.org/status/{key}","definitive_statuses":[422,409,400],
		"reconcile_delay":"2m","contract_version":"v3"}`, "").Capabilities())

	none := open(t, `{"url":"https://x.org","confirm":"response","definitive_statuses":[]}`, "").Capabilities()
	require.Empty(t, none.DefinitiveStatuses, "an empty list declares no status definitive")

	// The declared list is a copy: a caller cannot change the adapter's.
	ad := open(t, `{"url":"https://x.org","confirm":"response"}`, "")
	ad.Capabilities().DefinitiveStatuses[0] = 200
	require.Equal(t, transport.DefaultDefinitive(), ad.Capabilities().DefinitiveStatuses)
	require.Equal(t, []int{400, 401, 403, 413, 422, 429}, transport.DefaultDefinitive())
}

func TestSendDeliversThePreparedRequestOnce(t *testing.T) {
	ep := newEndpoint(t)
	ad := open(t, fmt.Sprintf(`{"url":%q,"confirm":"response","headers":{"X-Tenant":"42"}}`, ep.URL+"/hook"), "")
	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	out := ad.Send(ctx(t), p)
	require.Equal(t, platform.Sent, out.Result, "%v", out.Detail)
	require.Equal(t, "obj-1", out.ObjectID)

	got := ep.requests()
	require.Len(t, got, 1)
	require.Equal(t, http.MethodPost, got[0].Method)
	require.Equal(t, "/hook", got[0].Path)
	require.Equal(t, deliveryKey(t).String(), got[0].Header.Get("Idempotency-Key"))
	require.Equal(t, "application/json", got[0].Header.Get("Content-Type"))
	require.Equal(t, "42", got[0].Header.Get("X-Tenant"))
	require.Equal(t, p.Body, got[0].Body)
	require.Empty(t, got[0].Header.Get("Authorization"))
}

func TestSendClassifiesTheEndpointsAnswer(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		status      int
		body        string
		result      platform.Result
		reason      platform.Reason
		id          string
	}{
		{"created with an id", ``, 201, `{"id":"obj-7"}`, platform.Sent, "", "obj-7"},
		{"a numeric id at a nested pointer", `,"object_id_pointer":"/data/0/id"`, 200, `{"data":[{"id":12345678901234567890}]}`, platform.Sent, "", "12345678901234567890"},
		{"an escaped pointer", `,"object_id_pointer":"/a~1b/c~0d"`, 200, `{"a/b":{"c~d":"x1"}}`, platform.Sent, "", "x1"},
		{"2xx without an id", ``, 201, `{"ok":true}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"2xx with an empty id", ``, 201, `{"id":""}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"2xx with an object for an id", ``, 201, `{"id":{"v":1}}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"2xx that is not JSON", ``, 200, `created`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"422 by default", ``, 422, `{"error":"bad"}`, platform.NotSent, platform.ReasonPlatformRejected, ""},
		{"422 when none is definitive", `,"definitive_statuses":[]`, 422, `{}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"409", ``, 409, `{}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"409 declared definitive", `,"definitive_statuses":[409]`, 409, `{}`, platform.NotSent, platform.ReasonPlatformRejected, ""},
		{"503", ``, 503, `{}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"307", ``, 307, ``, platform.Unknown, platform.ReasonSendUnknown, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep := newEndpoint(t)
			ep.on("/hook", c.status, c.body)
			ad := open(t, fmt.Sprintf(`{"url":%q,"confirm":"response"%s}`, ep.URL+"/hook", c.extra), "")
			p, err := ad.Prepare(request(t))
			require.NoError(t, err)
			out := ad.Send(ctx(t), p)
			require.Equal(t, c.result, out.Result, "%v", out.Detail)
			require.Equal(t, c.reason, out.Reason)
			require.Equal(t, c.id, out.ObjectID)
			require.Equal(t, c.status, out.Detail["status"])
			require.Len(t, ep.requests(), 1)
		})
	}
}

func TestSendRefusesAPreparedRequestThatNoLongerMatchesItsHash(t *testing.T) {
	ep := newEndpoint(t)
	ad := open(t, fmt.Sprintf(`{"url":%q,"confirm":"response"}`, ep.URL), "")
	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	p.Body = []byte(`{"text":"something else"}`)
	out := ad.Send(ctx(t), p)
	require.Equal(t, platform.NotSent, out.Result)
	require.Contains(t, out.Detail["error"], "does not match its hash")
	require.Empty(t, ep.requests())
}

func TestSendToAClosedPortIsNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ad := open(t, fmt.Sprintf(`{"url":"http://%s/hook","confirm":"response"}`, addr), "")
	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	out := ad.Send(ctx(t), p)
	require.Equal(t, platform.NotSent, out.Result)
	require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
}

// The credential goes to the endpoint in its header, and nowhere else: not in the prepared
// request, not in its hash, not in an outcome's detail (even when the endpoint echoes it), not
// in an error.
func TestTheCredentialReachesTheEndpointAndNothingElse(t *testing.T) {
	ep := newEndpoint(t)
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"bad token `+r.Header.Get("Authorization")+`"}`)
	}
	ep.answer["/echo"] = echo
	ep.answer["/status/"+deliveryKey(t).String()] = echo
	ep.answer["/objects/obj-1"] = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	}
	settings := func(path string) string {
		return fmt.Sprintf(`{"url":%q,"credential_header":"Authorization","credential_prefix":"Bearer ",
			"readback_url":%q,"status_url":%q}`, ep.URL+path, ep.URL+"/objects/{id}", ep.URL+"/status/{key}")
	}
	t.Setenv(secretEnv, secret)
	ad := open(t, settings("/hook"), "env:"+secretEnv)
	var evidence []string // everything that leaves the adapter except the wire

	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	evidence = append(evidence, fmt.Sprintf("%#v", p), hex.EncodeToString(p.Hash[:]), string(p.Body))
	out := ad.Send(ctx(t), p)
	require.Equal(t, platform.Sent, out.Result)
	evidence = append(evidence, fmt.Sprintf("%#v", out))

	got := ep.requests()
	require.Equal(t, "Bearer "+secret, got[0].Header.Get("Authorization"), "the endpoint receives the credential")
	require.NotContains(t, p.Header, "Authorization")

	// The hash does not depend on the credential: another credential prepares the same hash.
	t.Setenv(secretEnv, "another-credential")
	other := open(t, settings("/hook"), "env:"+secretEnv)
	q, err := other.Prepare(request(t))
	require.NoError(t, err)
	require.Equal(t, p.Hash, q.Hash)

	// An endpoint that echoes the credential in an error body.
	t.Setenv(secretEnv, secret)
	echoing := open(t, settings("/echo"), "env:"+secretEnv)
	pe, err := echoing.Prepare(request(t))
	require.NoError(t, err)
	out = echoing.Send(ctx(t), pe)
	require.Equal(t, platform.NotSent, out.Result)
	require.Contains(t, out.Detail["response"], "Bearer [credential]", "the echo was redacted, not dropped")
	evidence = append(evidence, fmt.Sprintf("%#v", out))

	lookup := echoing.Lookup(ctx(t), request(t))
	require.Equal(t, platform.Unavailable, lookup.Result)
	evidence = append(evidence, fmt.Sprintf("%#v", lookup))

	_, err = echoing.ReadBack(ctx(t), request(t), "obj-1")
	require.Error(t, err)
	evidence = append(evidence, err.Error(), fmt.Sprintf("%+v", err))

	// A transport error (the endpoint is gone).
	ep.Close()
	out = echoing.Send(ctx(t), pe)
	require.NotEqual(t, platform.Sent, out.Result)
	evidence = append(evidence, fmt.Sprintf("%#v", out), fmt.Sprintf("%#v", echoing.Capabilities()))
	_, err = echoing.ReadBack(ctx(t), request(t), "obj-1")
	require.Error(t, err)
	evidence = append(evidence, err.Error())

	for _, e := range evidence {
		require.NotContains(t, e, secret)
	}
}

func TestReadBack(t *testing.T) {
	t.Run("without readback_url", func(t *testing.T) {
		_, err := open(t, `{"url":"https://x.org","confirm":"response"}`, "").ReadBack(ctx(t), request(t), "obj-1")
		require.ErrorIs(t, err, webhook.ErrNoReadBack)
	})

	ep := newEndpoint(t)
	ep.on("/objects/obj-1", 200, `{"id":"obj-1","text":"hello"}`)
	ep.on("/objects/obj-2", 404, `{"error":"no such object"}`)
	ep.on("/objects/obj-3", 200, `{"id":"obj-3"}`)
	ep.on("/objects/obj-4", 200, `{"text":42}`)
	ep.on("/objects/obj-5", 500, `{}`)
	ep.on("/objects/obj-6", 200, `not json`)
	ep.on("/objects/a/b c", 200, `{"text":"escaped"}`)
	ep.on("/nested/obj-1", 200, `{"data":{"body":"deep"}}`)
	ad := open(t, fmt.Sprintf(`{"url":%q,"readback_url":%q,"headers":{"X-Tenant":"42"}}`, ep.URL, ep.URL+"/objects/{id}"), "")

	obj, err := ad.ReadBack(ctx(t), request(t), "obj-1")
	require.NoError(t, err)
	require.Equal(t, platform.Object{ID: "obj-1", Text: "hello"}, obj)
	last := ep.requests()[len(ep.requests())-1]
	require.Equal(t, http.MethodGet, last.Method)
	require.Equal(t, "42", last.Header.Get("X-Tenant"))

	_, err = ad.ReadBack(ctx(t), request(t), "obj-2")
	require.ErrorIs(t, err, platform.ErrNotFound)

	obj, err = ad.ReadBack(ctx(t), request(t), "obj-3")
	require.NoError(t, err)
	require.Equal(t, platform.Object{ID: "obj-3", Text: ""}, obj, "no text at the pointer reads as empty")

	_, err = ad.ReadBack(ctx(t), request(t), "obj-4")
	require.ErrorContains(t, err, "not a string")

	_, err = ad.ReadBack(ctx(t), request(t), "obj-5")
	require.ErrorContains(t, err, "status 500")
	require.False(t, errors.Is(err, platform.ErrNotFound), "a 500 proves nothing about the object")

	_, err = ad.ReadBack(ctx(t), request(t), "obj-6")
	require.Error(t, err)

	obj, err = ad.ReadBack(ctx(t), request(t), "a/b c")
	require.NoError(t, err)
	require.Equal(t, "escaped", obj.Text)
	require.Equal(t, "/objects/a%2Fb%20c", ep.requests()[len(ep.requests())-1].RawPath, "the id is path-escaped")

	_, err = ad.ReadBack(ctx(t), request(t), "")
	require.Error(t, err)

	nested := open(t, fmt.Sprintf(`{"url":%q,"readback_url":%q,"readback_text_pointer":"/data/body"}`, ep.URL, ep.URL+"/nested/{id}"), "")
	obj, err = nested.ReadBack(ctx(t), request(t), "obj-1")
	require.NoError(t, err)
	require.Equal(t, "deep", obj.Text)
}

func TestLookup(t *testing.T) {
	t.Run("without status_url", func(t *testing.T) {
		ad := open(t, `{"url":"https://x.org","confirm":"response"}`, "")
		require.False(t, ad.Capabilities().StatusLookup)
		got := ad.Lookup(ctx(t), request(t))
		require.Equal(t, platform.Unavailable, got.Result)
		require.False(t, got.ProvenNotSent)
		require.Contains(t, got.Detail["error"], "no status lookup is configured")
	})

	key := deliveryKey(t).String()
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   platform.LookupResult
		proven bool
		id     string
	}{
		{"found", 200, `{"id":"obj-9"}`, platform.Found, false, "obj-9"},
		{"not found", 404, `{}`, platform.NotFound, true, ""},
		{"2xx without an id", 200, `{"state":"processing"}`, platform.Unavailable, false, ""},
		{"409", 409, `{}`, platform.Unavailable, false, ""},
		{"500", 500, `{}`, platform.Unavailable, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep := newEndpoint(t)
			ep.on("/status/"+key, c.status, c.body)
			ad := open(t, fmt.Sprintf(`{"url":%q,"status_url":%q}`, ep.URL, ep.URL+"/status/{key}"), "")
			require.True(t, ad.Capabilities().StatusLookup)
			got := ad.Lookup(ctx(t), request(t))
			require.Equal(t, c.want, got.Result, "%v", got.Detail)
			require.Equal(t, c.proven, got.ProvenNotSent)
			require.Equal(t, c.id, got.ObjectID)
			reqs := ep.requests()
			require.Len(t, reqs, 1, "one lookup, one request")
			require.Equal(t, http.MethodGet, reqs[0].Method)
			require.Equal(t, "/status/"+key, reqs[0].Path)
		})
	}

	t.Run("endpoint down", func(t *testing.T) {
		ep := newEndpoint(t)
		ad := open(t, fmt.Sprintf(`{"url":%q,"status_url":%q}`, ep.URL, ep.URL+"/status/{key}"), "")
		ep.Close()
		got := ad.Lookup(ctx(t), request(t))
		require.Equal(t, platform.Unavailable, got.Result)
		require.False(t, got.ProvenNotSent)
		require.NotEmpty(t, got.Detail["error"])
	})
}

func TestTheCredentialGoesWithReadsToo(t *testing.T) {
	ep := newEndpoint(t)
	ep.on("/objects/obj-1", 200, `{"text":"hello"}`)
	ep.on("/status/"+deliveryKey(t).String(), 200, `{"id":"obj-1"}`)
	t.Setenv(secretEnv, secret)
	ad := open(t, fmt.Sprintf(`{"url":%q,"credential_header":"X-Api-Key","readback_url":%q,"status_url":%q}`,
		ep.URL, ep.URL+"/objects/{id}", ep.URL+"/status/{key}"), "env:"+secretEnv)
	_, err := ad.ReadBack(ctx(t), request(t), "obj-1")
	require.NoError(t, err)
	require.Equal(t, platform.Found, ad.Lookup(ctx(t), request(t)).Result)
	for _, r := range ep.requests() {
		require.Equal(t, secret, r.Header.Get("X-Api-Key"), r.Path)
	}
}

// The example docs/platforms.md#the-webhook-platform documents opens, and means what it says.
func TestTheDocumentedExampleOpens(t *testing.T) {
	t.Setenv(secretEnv, secret)
	ad := open(t, `{
  "url": "https://api.example.org/v1/posts",
  "method": "POST",
  "headers": {"X-Tenant": "42"},
  "credential_header": "Authorization",
  "credential_prefix": "Bearer ",
  "body_template": {"text": "$text", "channel": "$target", "meta": {"key": "$key", "request": "$request"}},
  "object_id_pointer": "/data/id",
  "definitive_statuses": [400, 401, 403, 422],
  "readback_url": "https://api.example.org/v1/posts/{id}",
  "readback_text_pointer": "/data/text",
  "status_url": "https://api.example.org/v1/idempotency/{key}",
  "reconcile_delay": "1m",
  "contract_version": "2025-01"
}`, "env:"+secretEnv)
	require.Equal(t, platform.Capabilities{StatusLookup: true, DefinitiveStatuses: []int{400, 401, 403, 422},
		ContractVersion: "2025-01", ReconcileDelay: time.Minute, UnavailableStatuses: []int{}, AuthStatuses: []int{401, 403}}, ad.Capabilities())
	p, err := ad.Prepare(request(t))
	require.NoError(t, err)
	require.Equal(t, `{"channel":"feed/7","meta":{"key":"`+deliveryKey(t).String()+`","request":{"text":"hello"}},"text":"hello"}`, string(p.Body))
}

// A webhook must say how a success is confirmed: without readback_url, status_url or an
// explicit confirm, every success would end parked for a person. The refusal names the three
// choices; each one alone opens.
func TestAWebhookThatCanConfirmNothingIsRefused(t *testing.T) {
	for _, settings := range []string{`{"url":"https://x.org"}`, `{"url":"https://x.org","confirm":""}`,
		`{"url":"https://x.org","definitive_statuses":[],"object_id_pointer":"/data/id"}`} {
		_, err := webhook.Open(platform.Account{ID: "acct-1", Platform: webhook.Name, Settings: json.RawMessage(settings)})
		require.ErrorIs(t, err, webhook.ErrInvalidSettings, settings)
		require.ErrorIs(t, err, webhook.ErrNothingConfirms, settings)
		for _, choice := range []string{"readback_url", "status_url", `"confirm": "response"`} {
			require.ErrorContains(t, err, choice, settings)
		}
	}
	for _, settings := range []string{`{"url":"https://x.org","readback_url":"https://x.org/{id}"}`,
		`{"url":"https://x.org","status_url":"https://x.org/status/{key}"}`, `{"url":"https://x.org","confirm":"response"}`,
		`{"url":"https://x.org","confirm":"response","status_url":"https://x.org/status/{key}"}`} {
		_, err := webhook.Open(platform.Account{ID: "acct-1", Platform: webhook.Name, Settings: json.RawMessage(settings)})
		require.NoError(t, err, settings)
	}
}

// $reply_to_object is a reply's parent's object id, "" for any other intent; a reply whose
// parent's object is not known is not rendered.
func TestTheReplyToObjectPlaceholder(t *testing.T) {
	ad := open(t, `{"url":"https://example.org/hook","confirm":"response","body_template":{"in_reply_to":"$reply_to_object","text":"$text"}}`, "")
	r := request(t)
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, `{"in_reply_to":"","text":"hello"}`, string(p.Body))
	r.Target = ""
	r.Reply = &platform.Reply{Parent: deliveryKey(t), ObjectID: "obj-41"}
	p, err = ad.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, `{"in_reply_to":"obj-41","text":"hello"}`, string(p.Body))
	r.Reply.ObjectID = ""
	_, err = ad.Prepare(r)
	require.Error(t, err)
}
