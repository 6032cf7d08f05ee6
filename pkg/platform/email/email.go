package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
)

// Name is the platform name accounts served by this adapter carry (platform.Account.Platform).
const Name = "email"

// KeyHeader is the header that carries the intent's delivery key in every message.
const KeyHeader = "X-Atmost-Delivery-Key"

// Method is the Prepared's Method of every send: an SMTP submission, not an HTTP request.
const Method = "SMTP"

// adapter is the email adapter opened for one account.
type adapter struct {
	account  string
	cfg      config
	password redactor
}

// Open validates a's settings (Settings) and credential (the password of Settings.Username,
// read through platform.Account.Secret) and returns its adapter. It makes no network call.
// Every error about the settings or the credential wraps ErrInvalidSettings (or
// platform.ErrNoCredential when the reference names nothing), and none holds the credential.
func Open(a platform.Account) (platform.Adapter, error) {
	cfg, err := parseSettings(a.Settings)
	if err != nil {
		return nil, err
	}
	if a.CredentialRef == "" {
		return nil, invalid("the account has no credential reference: the password must come from one (env:NAME or file:/path)")
	}
	pw, err := a.Secret()
	if err != nil {
		return nil, fmt.Errorf("email: credential: %w", err)
	}
	switch {
	case pw == "":
		return nil, invalid("the credential %s names is empty", a.CredentialRef)
	case strings.IndexFunc(pw, unicode.IsControl) >= 0:
		return nil, invalid("the credential %s names holds a control character: not a password", a.CredentialRef)
	}
	return &adapter{account: a.ID, cfg: cfg, password: redactor(pw)}, nil
}

// Capabilities declare no status lookup (finding no copy proves nothing, see Lookup) and no
// definitive status: SMTP's refusals are replies to commands, which Send classifies by the
// step they answer, not HTTP statuses.
func (a *adapter) Capabilities() platform.Capabilities {
	return platform.Capabilities{ContractVersion: a.cfg.contract, ReconcileDelay: a.cfg.reconcileDelay}
}

// MessageID is the Message-ID of the message for key, with its angle brackets:
// "<atmost.HEX@domain>", HEX the key's 64 hex digits and domain the sender's. It is the same
// for every attempt of the intent, and the object id of a sent message.
func MessageID(key identity.DeliveryKey, fromDomain string) string {
	return "<atmost." + strings.TrimPrefix(key.String(), "dk1:") + "@" + fromDomain + ">"
}

// post is the one action's request.
type post struct {
	Text    string
	Subject string
}

func parsePost(r platform.Request) (post, error) {
	var p post
	switch {
	case r.Action != "post":
		return p, badRequest("action %q: the email adapter sends only post", r.Action)
	case r.Target != "":
		return p, badRequest("target %q: a post goes to the account's recipients; the target must be empty", r.Target)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Request))
	dec.DisallowUnknownFields()
	var raw struct {
		Text    *string `json:"text"`
		Subject *string `json:"subject"`
	}
	if err := dec.Decode(&raw); err != nil {
		return p, badRequest("request: %v", err)
	}
	if raw.Text == nil || *raw.Text == "" {
		return p, badRequest("request: text is required")
	}
	if !utf8.ValidString(*raw.Text) {
		return p, badRequest("request: text is not UTF-8")
	}
	p.Text = *raw.Text
	if raw.Subject != nil {
		if strings.ContainsAny(*raw.Subject, "\r\n") || !utf8.ValidString(*raw.Subject) {
			return p, badRequest("request: subject must be one line of UTF-8")
		}
		p.Subject = *raw.Subject
	}
	return p, nil
}

// message renders the message of r: headers in a fixed order, the text in base64 so that the
// servers carry its bytes unchanged. No Date: the message is the same for every Prepare, and
// the submission server adds one.
func (a *adapter) message(r platform.Request, p post) []byte {
	var b bytes.Buffer
	h := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	h("From", a.cfg.from)
	h("To", strings.Join(a.cfg.to, ", "))
	subject := p.Subject
	if subject == "" {
		subject = a.cfg.subject
	}
	if subject != "" {
		h("Subject", mime.QEncoding.Encode("utf-8", subject))
	}
	h("Message-ID", MessageID(r.Key, a.cfg.fromDomain))
	h(KeyHeader, r.Key.String())
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "base64")
	b.WriteString("\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(p.Text))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.Bytes()
}

// Prepare renders the submission of r: Method "SMTP", the URL smtp://SUBMISSION (smtps:// for
// implicit TLS), the envelope as the headers Mail-From and Rcpt-To, and the message as the
// body. The same request gives the same bytes; the password is not among them.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	if r.Key.IsZero() {
		return platform.Prepared{}, badRequest("prepare: the request has no delivery key")
	}
	if r.Account != a.account {
		return platform.Prepared{}, fmt.Errorf("%w: the request is for account %q, the adapter for %q", ErrWrongAccount, r.Account, a.account)
	}
	p, err := parsePost(r)
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("prepare %s: %w", r.Key, err)
	}
	scheme := "smtp://"
	if a.cfg.implicitTLS {
		scheme = "smtps://"
	}
	header := map[string][]string{"Mail-From": {a.cfg.from}, "Rcpt-To": append([]string(nil), a.cfg.to...)}
	return platform.NewPrepared(r, Method, scheme+a.cfg.submission, header, a.message(r, p)), nil
}

// The steps of a submission, as Detail names them. Every step before StepBody proves that no
// message exists: the server has not received its text. A failure at StepBody or StepEnd does
// not.
const (
	StepVerify  = "verify"
	StepConnect = "connect"
	StepHello   = "hello"
	StepTLS     = "tls"
	StepAuth    = "auth"
	StepMail    = "mail"
	StepRcpt    = "rcpt"
	StepData    = "data"
	StepBody    = "body"
	StepEnd     = "end"
)

// Send submits p once: connect, EHLO, STARTTLS (or implicit TLS), AUTH PLAIN, MAIL FROM, RCPT
// TO for each recipient, DATA, the message and the final dot, and classifies the ending by
// the step it reached:
//
//   - a 250 to the final dot is Sent, with the message's Message-ID as the object id;
//   - any failure before the server's 354 to DATA is NotSent: the server never received the
//     message's text, so it can hold no message. A refusal (a 4xx or 5xx reply, e.g. 535 to
//     AUTH, 550 to RCPT) is platform_rejected; a failure to connect, a TLS failure or a
//     dropped connection is connection_failed;
//   - any failure after the 354 is Unknown: once the final dot may have reached the server,
//     the server may have queued the message whatever the client saw (a drop before the 250,
//     a deadline, even a refusal after the dot, which atmost does not take as proof).
//
// There is no retry: one connection, one transaction. Nothing is written after ctx's end.
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	detail := map[string]any{"message_id": MessageID(p.Request.Key, a.cfg.fromDomain), "submission": a.cfg.submission}
	notSent := func(step string, reason platform.Reason, err error) platform.Outcome {
		detail["step"] = step
		a.describe(detail, err)
		out := platform.Outcome{Result: platform.NotSent, Reason: reason, Detail: detail}
		// No connection says the server takes nothing now (the account holds); a refusal is
		// the message's. SMTP's codes are not read for a refused credential yet.
		out.Signal = a.Capabilities().Signal(out)
		return out
	}
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash || p.Method != Method {
		return notSent(StepVerify, platform.ReasonConnectionFailed, errors.New("email: the prepared request does not match its hash; nothing was sent"))
	}
	if err := ctx.Err(); err != nil {
		return notSent(StepConnect, platform.ReasonConnectionFailed, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", a.cfg.submission)
	if err != nil {
		return notSent(StepConnect, platform.ReasonConnectionFailed, err)
	}
	// The context's end closes the connection: no byte is written after it, and a wait for a
	// reply ends with it.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()
	before := func(step string, err error) platform.Outcome {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			detail["reply"] = se.Code
			return notSent(step, platform.ReasonPlatformRejected, err)
		}
		return notSent(step, platform.ReasonConnectionFailed, err)
	}
	var c *smtp.Client
	if a.cfg.implicitTLS {
		tc := tls.Client(conn, a.cfg.tls(a.cfg.submissionHost))
		if err := tc.HandshakeContext(ctx); err != nil {
			return notSent(StepTLS, platform.ReasonConnectionFailed, err)
		}
		c = smtp.NewClient(tc)
	} else if c, err = smtp.NewClientStartTLS(conn, a.cfg.tls(a.cfg.submissionHost)); err != nil {
		// The greeting, EHLO or STARTTLS failed, or the server offers no STARTTLS: the password
		// is never sent in clear.
		return before(StepTLS, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		c.CommandTimeout = time.Until(deadline)
		c.SubmissionTimeout = time.Until(deadline)
	}
	if err := c.Auth(sasl.NewPlainClient("", a.cfg.username, string(a.password))); err != nil {
		return before(StepAuth, err)
	}
	if err := c.Mail(a.cfg.from, nil); err != nil {
		return before(StepMail, err)
	}
	for _, to := range a.cfg.to {
		if err := c.Rcpt(to, nil); err != nil {
			detail["recipient"] = to
			return before(StepRcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return before(StepData, err)
	}
	unknown := func(step string, err error) platform.Outcome {
		detail["step"] = step
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			detail["reply"] = se.Code
		}
		a.describe(detail, err)
		return platform.Outcome{Result: platform.Unknown, Reason: platform.ReasonSendUnknown, Detail: detail}
	}
	if _, err := w.Write(p.Body); err != nil {
		return unknown(StepBody, err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return unknown(StepEnd, err)
	}
	detail["step"] = StepEnd
	detail["reply"] = 250
	detail["reply_text"] = a.password.redact(resp.StatusText)
	_ = c.Quit()
	return platform.Outcome{Result: platform.Sent, ObjectID: MessageID(p.Request.Key, a.cfg.fromDomain), Detail: detail}
}

// describe adds err's text, without the password, to detail.
func (a *adapter) describe(detail map[string]any, err error) {
	if err != nil {
		detail["error"] = a.password.redact(err.Error())
	}
}
