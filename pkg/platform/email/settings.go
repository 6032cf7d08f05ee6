package email

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/mail"
	"os"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
)

// Settings are an account's email settings, the JSON of platform.Account.Settings. Unknown
// fields are refused; a field left out takes its default. The password is not among them: it
// comes from the account's credential reference and serves both SMTP AUTH and IMAP LOGIN.
type Settings struct {
	// Submission is the SMTP submission server, host:port (e.g. "smtp.example:587"). Required.
	Submission string `json:"submission"`
	// SubmissionTLS is how the submission is encrypted: "starttls" (default; port 587) or
	// "tls" (implicit TLS; port 465). There is no plaintext mode: the password travels in it.
	SubmissionTLS string `json:"submission_tls,omitempty"`
	// IMAP is the IMAP server that holds Mailbox, host:port (e.g. "imap.example:993"). Required.
	IMAP string `json:"imap"`
	// IMAPTLS is "tls" (default; implicit TLS, port 993) or "starttls" (port 143).
	IMAPTLS string `json:"imap_tls,omitempty"`
	// CAFile is a PEM file of the certificates trusted for both servers, instead of the
	// system's roots (a private CA, a self-signed server). Optional.
	CAFile string `json:"ca_file,omitempty"`
	// Username is the login of both servers. Required.
	Username string `json:"username"`
	// From is the sender's address (the envelope's MAIL FROM and the From header). Required.
	From string `json:"from"`
	// To are the recipients (the envelope's RCPT TO and the To header): 1 to 100. Required.
	To []string `json:"to"`
	// Subject is the Subject of a message whose request names none. Optional.
	Subject string `json:"subject,omitempty"`
	// Mailbox is the IMAP mailbox, readable with Username's login, that holds a copy of every
	// message the server accepted from the account (an archive or journal copy, e.g. a
	// sender_bcc to a folder of the account): where read-back and lookup search by Message-ID.
	// Required.
	Mailbox string `json:"mailbox"`
	// ReconcileDelay is how long after a send's deadline the lookup is meaningful: a positive
	// Go duration. Default "1m".
	ReconcileDelay string `json:"reconcile_delay,omitempty"`
	// ContractVersion names the protocol contract; an account pinned to another one is
	// refused at authorization. Default "smtp/rfc5321".
	ContractVersion string `json:"contract_version,omitempty"`
}

const (
	defaultReconcileDelay  = time.Minute
	defaultContractVersion = "smtp/rfc5321"
	maxRecipients          = 100
)

// config is a validated Settings with its defaults applied.
type config struct {
	submission, submissionHost string
	implicitTLS                bool
	imap, imapHost             string
	imapStartTLS               bool
	roots                      *x509.CertPool // nil: the system's
	username                   string
	from                       string
	fromDomain                 string
	to                         []string
	subject                    string
	mailbox                    string
	reconcileDelay             time.Duration
	contract                   string
}

func (c config) tls(host string) *tls.Config {
	return &tls.Config{ServerName: host, RootCAs: c.roots, MinVersion: tls.VersionTLS12}
}

// parseSettings decodes and validates raw.
func parseSettings(raw json.RawMessage) (config, error) {
	var s Settings
	if len(bytes.TrimSpace(raw)) == 0 {
		return config{}, invalid("submission, imap, username, from, to and mailbox are required")
	}
	// encoding/json keeps the last of two equal keys; the canonical parser refuses them.
	if _, err := identity.CanonicalObject(raw); err != nil {
		return config{}, invalid("not a JSON object without duplicate keys: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return config{}, invalid("%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return config{}, invalid("trailing data after the settings object")
	}
	return s.validate()
}

func hostPort(field, v string) (string, error) {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" || port == "" {
		return "", invalid("%s %q: want host:port", field, v)
	}
	return host, nil
}

// address checks that v is one bare address (local@domain), no display name.
func address(field, v string) (string, error) {
	a, err := mail.ParseAddress(v)
	if err != nil || a.Name != "" || a.Address != v || strings.ContainsAny(v, "<>\r\n\t ") {
		return "", invalid("%s %q: want a bare address, local@domain", field, v)
	}
	at := strings.LastIndexByte(v, '@')
	if at <= 0 || at == len(v)-1 {
		return "", invalid("%s %q: want a bare address, local@domain", field, v)
	}
	return v[at+1:], nil
}

func positive(field, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, invalid("%s: %v", field, err)
	}
	if d <= 0 {
		return 0, invalid("%s %s: must be positive", field, v)
	}
	return d, nil
}

func (s Settings) validate() (config, error) {
	var c config
	var err error
	if s.Submission == "" {
		return c, invalid("submission is required (host:port of the SMTP submission server)")
	}
	if c.submissionHost, err = hostPort("submission", s.Submission); err != nil {
		return c, err
	}
	c.submission = s.Submission
	switch s.SubmissionTLS {
	case "", "starttls":
	case "tls":
		c.implicitTLS = true
	default:
		return c, invalid("submission_tls %q: want starttls or tls (there is no plaintext mode)", s.SubmissionTLS)
	}
	if s.IMAP == "" {
		return c, invalid("imap is required (host:port of the IMAP server that holds the mailbox)")
	}
	if c.imapHost, err = hostPort("imap", s.IMAP); err != nil {
		return c, err
	}
	c.imap = s.IMAP
	switch s.IMAPTLS {
	case "", "tls":
	case "starttls":
		c.imapStartTLS = true
	default:
		return c, invalid("imap_tls %q: want tls or starttls (there is no plaintext mode)", s.IMAPTLS)
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return c, invalid("ca_file: %v", err)
		}
		c.roots = x509.NewCertPool()
		if !c.roots.AppendCertsFromPEM(pem) {
			return c, invalid("ca_file %s holds no PEM certificate", s.CAFile)
		}
	}
	if s.Username == "" || strings.ContainsAny(s.Username, "\r\n\x00") {
		return c, invalid("username is required, on one line")
	}
	c.username = s.Username
	if s.From == "" {
		return c, invalid("from is required (the sender's address)")
	}
	if c.fromDomain, err = address("from", s.From); err != nil {
		return c, err
	}
	c.from = s.From
	if len(s.To) == 0 || len(s.To) > maxRecipients {
		return c, invalid("to: want 1 to %d recipients, have %d", maxRecipients, len(s.To))
	}
	for _, to := range s.To {
		if _, err := address("to", to); err != nil {
			return c, err
		}
	}
	c.to = append([]string(nil), s.To...)
	if strings.ContainsAny(s.Subject, "\r\n") {
		return c, invalid("subject: one line")
	}
	c.subject = s.Subject
	if s.Mailbox == "" || strings.ContainsAny(s.Mailbox, "\r\n\x00") {
		return c, invalid("mailbox is required (the IMAP mailbox holding a copy of every accepted message)")
	}
	c.mailbox = s.Mailbox
	if c.reconcileDelay, err = positive("reconcile_delay", s.ReconcileDelay, defaultReconcileDelay); err != nil {
		return c, err
	}
	c.contract = defaultContractVersion
	if s.ContractVersion != "" {
		c.contract = s.ContractVersion
	}
	return c, nil
}
