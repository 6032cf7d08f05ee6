package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// page is what every template gets: the visitor, the page's own data, and the navigation.
type page struct {
	Title    string
	Nav      string
	Operator string
	// CanChange: the visitor's role may change the ledger, and the page offers the changes.
	CanChange bool
	Viewer    bool // the visitor is a viewer: the page says why it offers no change
	CSRF      string
	Flash     string
	Live      bool // the overview's live stream of ATMOST_EVENTS is available
	Data      any
}

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsp": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago": func(t time.Time) string { return ago(time.Since(t)) },
	"short": func(k identity.DeliveryKey) string {
		s := k.String()
		if i := strings.IndexByte(s, ':'); i >= 0 && len(s) > i+13 {
			return s[:i+13] + "…"
		}
		return s
	},
	"dash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
	"pretty": prettyJSON,
	"excerpt": func(request string) string {
		t := requestText(request)
		if t == "" {
			t = request
		}
		if r := []rune(t); len(r) > 60 {
			return string(r[:60]) + "…"
		}
		return t
	},
	"ms":       func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) },
	"num":      func(n int64) string { return thousands(n) },
	"numi":     func(n int) string { return thousands(int64(n)) },
	"query":    func(kv ...string) template.URL { return template.URL(queryOf(kv...)) },
	"meaning":  func(r ledger.Reason) string { return reasonMeaning[r] },
	"runbook":  runbookHTML,
	"fitTitle": func(a string) string { return strings.TrimSuffix(fitTitles[a], "…") },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/base.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "base" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", n, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes the page name with data; a template that fails writes nothing half-done.
func (s *Server) render(w http.ResponseWriter, status int, name string, v visitor, data any) {
	t := s.pages[name]
	if t == nil {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	p := page{Title: titles[name], Nav: name, Operator: v.operator, CanChange: v.canChange(), Viewer: v.role == ledger.RoleViewer, CSRF: v.csrf(), Live: s.cfg.JetStream != nil, Data: data}
	if v.session != nil {
		s.sessions.mu.Lock()
		p.Flash, v.session.flash = v.session.flash, ""
		s.sessions.mu.Unlock()
	}
	var buf bytes.Buffer
	entry := "page"
	if name == "login" {
		entry = "login"
	}
	if strings.HasSuffix(name, "_fragment") {
		entry = "fragment"
	}
	if err := t.ExecuteTemplate(&buf, entry, p); err != nil {
		s.log.Error("render " + name + ": " + err.Error())
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// flash leaves a message for the session's next page.
func (s *Server) flash(v visitor, msg string) {
	if v.session == nil {
		return
	}
	s.sessions.mu.Lock()
	v.session.flash = msg
	s.sessions.mu.Unlock()
}

// fail answers a request the ledger could not serve, and logs why.
func (s *Server) fail(w http.ResponseWriter, err error) {
	s.log.Error("ledger error", zap.Error(err))
	http.Error(w, "the ledger could not answer: "+err.Error(), http.StatusServiceUnavailable)
}

// audit logs a change a visitor asked for: who, from where, what, on which intent, switch or
// policy, and the result ("done", or why it was refused or failed).
func (s *Server) audit(r *http.Request, v visitor, action, target, result string) {
	s.log.Info("change", zap.String("actor", v.actor()), zap.String("client", clientOf(r)),
		zap.String("action", action), zap.String("target", target), zap.String("result", result))
}

var titles = map[string]string{
	"login": "Log in", "overview": "Overview", "intents": "Intents", "intent": "Intent", "confirm": "Confirm",
	"result": "Done", "bulk": "Bulk action", "rejects": "Rejects", "controls": "Controls", "replayed": "Replayed",
}

func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func prettyJSON(b any) string {
	var raw []byte
	switch x := b.(type) {
	case string:
		raw = []byte(x)
	case []byte:
		raw = x
	case json.RawMessage:
		raw = x
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

func queryOf(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q.Encode()
}
