package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
)

// The placeholders of a body template: a JSON string exactly equal to one of them is replaced.
const (
	placeholderKey     = "$key"     // the delivery key's text, "dk1:..."
	placeholderAccount = "$account" // the account id
	placeholderAction  = "$action"
	placeholderTarget  = "$target"
	placeholderText    = "$text"    // the normalized text ("" when the action carries none)
	placeholderRequest = "$request" // the canonical request object, as JSON (not a string)
	// placeholderReplyTo is, for a reply (envelope reply_to), the object its parent created,
	// as the parent's platform named it; "" for any other intent.
	placeholderReplyTo = "$reply_to_object"
)

var placeholders = []string{placeholderKey, placeholderAccount, placeholderAction, placeholderTarget,
	placeholderText, placeholderRequest, placeholderReplyTo}

// defaultTemplate is the body when an account declares none.
const defaultTemplate = `{"delivery_key":"$key","account":"$account","action":"$action","target":"$target","request":"$request"}`

// looksLikePlaceholder catches a misspelt placeholder, which would otherwise be sent as text.
var looksLikePlaceholder = regexp.MustCompile(`^\$[A-Za-z_]+$`)

// template is a parsed body template.
type template struct {
	root        any // decoded with json.Number
	usesRequest bool
}

func parseTemplate(raw json.RawMessage) (template, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(defaultTemplate)
	}
	root, err := decodeJSON(raw)
	if err != nil {
		return template{}, err
	}
	t := template{root: root}
	var problems []string
	walkStrings(root, "", func(path, s string) {
		switch {
		case s == placeholderRequest:
			t.usesRequest = true
		case looksLikePlaceholder.MatchString(s) && !isPlaceholder(s):
			problems = append(problems, fmt.Sprintf("unknown placeholder %q at %s (known: %s)", s, displayPath(path), strings.Join(placeholders, ", ")))
		}
	})
	if len(problems) > 0 {
		sort.Strings(problems)
		return template{}, errors.New(strings.Join(problems, "; "))
	}
	return t, nil
}

func isPlaceholder(s string) bool {
	for _, p := range placeholders {
		if s == p {
			return true
		}
	}
	return false
}

func displayPath(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// walkStrings calls f for every string value (not object keys), with its JSON pointer.
func walkStrings(v any, path string, f func(path, s string)) {
	switch node := v.(type) {
	case map[string]any:
		for k, child := range node {
			walkStrings(child, path+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), f)
		}
	case []any:
		for i, child := range node {
			walkStrings(child, fmt.Sprintf("%s/%d", path, i), f)
		}
	case string:
		f(path, node)
	}
}

// render returns the body for r: the template with every placeholder replaced, in canonical
// JSON (RFC 8785), so the same request always gives the same bytes.
func (t template) render(r platform.Request) ([]byte, error) {
	if t.usesRequest && len(r.Request) == 0 {
		return nil, errors.New("the template uses $request and the request has no canonical JSON")
	}
	values := map[string]any{
		placeholderKey:     r.Key.String(),
		placeholderAccount: r.Account,
		placeholderAction:  r.Action,
		placeholderTarget:  r.Target,
		placeholderText:    r.Text,
		placeholderRequest: r.Request,
		placeholderReplyTo: "",
	}
	if r.Reply != nil {
		if r.Reply.ObjectID == "" {
			return nil, fmt.Errorf("a reply whose parent's object is not known (%s is not published)", r.Reply.Parent)
		}
		values[placeholderReplyTo] = r.Reply.ObjectID
	}
	b, err := json.Marshal(substitute(t.root, values))
	if err != nil {
		return nil, err
	}
	return identity.CanonicalJSON(b)
}

// substitute returns a copy of v with every string equal to a placeholder replaced.
func substitute(v any, values map[string]any) any {
	switch node := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(node))
		for k, child := range node {
			out[k] = substitute(child, values)
		}
		return out
	case []any:
		out := make([]any, len(node))
		for i, child := range node {
			out[i] = substitute(child, values)
		}
		return out
	case string:
		if value, ok := values[node]; ok {
			return value
		}
	}
	return v
}
