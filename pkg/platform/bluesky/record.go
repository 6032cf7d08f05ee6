package bluesky

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

// The collections (record types) the adapter creates, and the embed a quote carries.
const (
	collectionPost   = "app.bsky.feed.post"
	collectionLike   = "app.bsky.feed.like"
	collectionRepost = "app.bsky.feed.repost"
	collectionFollow = "app.bsky.graph.follow"
	embedRecord      = "app.bsky.embed.record"
)

// action says how an intent's action becomes a record: its collection and the request fields
// it takes.
type action struct {
	collection string
	fields     []string // the request's fields, every one required except "langs" and "images"
	target     string   // what the target is: "" (none), "uri" (the at-uri of a strong reference) or "did"
}

// actions are the intent actions the adapter knows; any other is refused by Prepare.
var actions = map[string]action{
	"post":   {collectionPost, []string{"text", "langs", "images"}, ""},
	"reply":  {collectionPost, []string{"text", "langs", "images", "parent", "root"}, "uri"},
	"quote":  {collectionPost, []string{"text", "langs", "subject"}, "uri"},
	"like":   {collectionLike, []string{"subject"}, "uri"},
	"repost": {collectionRepost, []string{"subject"}, "uri"},
	"follow": {collectionFollow, nil, "did"},
}

// strongRef is com.atproto.repo.strongRef: a record and the version of it that is meant.
type strongRef struct {
	URI string `json:"uri"`
	CID string `json:"cid"`
}

// requestFields are every field a request may hold; which ones an action takes is its
// action.fields.
type requestFields struct {
	Text    *string    `json:"text"`
	Langs   []string   `json:"langs"`
	Parent  *strongRef `json:"parent"`
	Root    *strongRef `json:"root"`
	Subject *strongRef `json:"subject"`
	Images  []imageRef `json:"images"`
}

// intent is a request parsed and checked for its action.
type intent struct {
	action     string
	collection string
	text       string
	langs      []string
	parent     *strongRef // reply
	root       *strongRef // reply
	subject    *strongRef // quote, like, repost
	follow     string     // follow: the DID
	// reply: a post answering another intent's (platform.Request.Reply), whose parent and root
	// ResolveReply read (then parent and root are set); replyTo is the parent's at-uri, ""
	// where it is not known (a lookup).
	reply   bool
	replyTo string
	images  []imageRef // post, reply: the images to upload (Stage) and embed
}

// parseIntent checks r's action, target and request, and returns what its record is made of.
func parseIntent(r platform.Request) (intent, error) {
	act, ok := actions[r.Action]
	if !ok {
		return intent{}, badRequest("action %q: want one of post, reply, quote, like, repost, follow", r.Action)
	}
	in := intent{action: r.Action, collection: act.collection}
	var f requestFields
	raw := bytes.TrimSpace(r.Request)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return in, badRequest("%s: request: %v", r.Action, err)
	}
	present := map[string]bool{"text": f.Text != nil, "langs": f.Langs != nil, "parent": f.Parent != nil,
		"root": f.Root != nil, "subject": f.Subject != nil, "images": f.Images != nil}
	for _, name := range []string{"text", "langs", "images", "parent", "root", "subject"} {
		ok := present[name]
		switch {
		case ok && !slices.Contains(act.fields, name):
			return in, badRequest("%s: the request field %q does not belong to this action", r.Action, name)
		case !ok && name != "langs" && name != "images" && slices.Contains(act.fields, name):
			return in, badRequest("%s: the request field %q is required", r.Action, name)
		}
	}
	if f.Text != nil {
		in.text = *f.Text
	}
	if f.Langs != nil {
		if len(f.Langs) > 3 {
			return in, badRequest("%s: langs: at most 3 languages", r.Action)
		}
		for _, l := range f.Langs {
			if !langRE.MatchString(l) {
				return in, badRequest("%s: langs: %q is not a language tag", r.Action, l)
			}
		}
		in.langs = f.Langs
	}
	if f.Images != nil {
		if len(f.Images) == 0 || len(f.Images) > MaxImages {
			return in, badRequest("%s: images: 1 to %d images", r.Action, MaxImages)
		}
		for i, im := range f.Images {
			if err := im.check(); err != nil {
				return in, badRequest("%s: images[%d]: %v", r.Action, i, err)
			}
		}
		in.images = f.Images
	}
	for _, named := range []struct {
		name string
		ref  *strongRef
	}{{"parent", f.Parent}, {"root", f.Root}, {"subject", f.Subject}} {
		name, ref := named.name, named.ref
		if ref == nil {
			continue
		}
		if err := ref.check(); err != nil {
			return in, badRequest("%s: %s: %v", r.Action, name, err)
		}
	}
	in.parent, in.root, in.subject = f.Parent, f.Root, f.Subject
	if r.Reply != nil {
		// A reply to another intent: the references are read from the PDS (ResolveReply), not
		// given by the producer, and the post names no target.
		if r.Action != "post" {
			return in, badRequest("%s: reply_to is for a post (the next post of a thread), not a %s", r.Action, r.Action)
		}
		in.reply, in.replyTo = true, r.Reply.ObjectID
		if r.Reply.Refs != nil {
			var refs replyRef
			if err := json.Unmarshal(r.Reply.Refs, &refs); err != nil {
				return in, fmt.Errorf("%s: the parent's references: %w", r.Action, err)
			}
			in.parent, in.root = &refs.Parent, &refs.Root
		}
	}

	switch act.target {
	case "":
		if r.Target != "" {
			return in, badRequest("%s: the target must be empty, not %q", r.Action, r.Target)
		}
	case "did":
		if !validDID(r.Target) {
			return in, badRequest("%s: the target %q is not a DID", r.Action, r.Target)
		}
		in.follow = r.Target
	case "uri":
		ref := f.Subject
		name := "subject"
		if r.Action == "reply" {
			ref, name = f.Parent, "parent"
		}
		if r.Target != ref.URI {
			return in, badRequest("%s: the target %q differs from %s.uri %q", r.Action, r.Target, name, ref.URI)
		}
	}
	return in, nil
}

// record is the record to create, with createdAt.
func (in intent) record(createdAt string) any {
	switch in.action {
	case "like", "repost":
		return subjectRecord{Type: in.collection, Subject: *in.subject, CreatedAt: createdAt}
	case "follow":
		return followRecord{Type: in.collection, Subject: in.follow, CreatedAt: createdAt}
	}
	p := postRecord{Type: collectionPost, Text: in.text, Langs: in.langs, CreatedAt: createdAt}
	if in.action == "reply" || in.reply {
		p.Reply = &replyRef{Root: *in.root, Parent: *in.parent}
	}
	if in.action == "quote" {
		p.Embed = &recordEmbed{Type: embedRecord, Record: *in.subject}
	}
	if len(in.images) > 0 {
		e := imagesEmbed{Type: embedImages}
		for _, im := range in.images {
			e.Images = append(e.Images, embedImage{Alt: im.Alt, Image: im.blob()})
		}
		p.Embed = e
	}
	return p
}

// postRecord is app.bsky.feed.post.
type postRecord struct {
	Type      string    `json:"$type"`
	Text      string    `json:"text"`
	Reply     *replyRef `json:"reply,omitempty"`
	Embed     any       `json:"embed,omitempty"` // *recordEmbed or imagesEmbed
	Langs     []string  `json:"langs,omitempty"`
	CreatedAt string    `json:"createdAt"`
}

// replyRef is app.bsky.feed.post#replyRef.
type replyRef struct {
	Root   strongRef `json:"root"`
	Parent strongRef `json:"parent"`
}

// recordEmbed is app.bsky.embed.record.
type recordEmbed struct {
	Type   string    `json:"$type"`
	Record strongRef `json:"record"`
}

// subjectRecord is app.bsky.feed.like and app.bsky.feed.repost.
type subjectRecord struct {
	Type      string    `json:"$type"`
	Subject   strongRef `json:"subject"`
	CreatedAt string    `json:"createdAt"`
}

// followRecord is app.bsky.graph.follow.
type followRecord struct {
	Type      string `json:"$type"`
	Subject   string `json:"subject"`
	CreatedAt string `json:"createdAt"`
}

// storedRecord is what a read-back needs of a record's value.
type storedRecord struct {
	Type    string          `json:"$type"`
	Text    string          `json:"text"`
	Subject json.RawMessage `json:"subject"`
	Reply   *replyRef       `json:"reply"`
	Embed   *struct {
		Type   string     `json:"$type"`
		Record *strongRef `json:"record"`
		Images []struct {
			Alt   string `json:"alt"`
			Image struct {
				Ref struct {
					Link string `json:"$link"`
				} `json:"ref"`
			} `json:"image"`
		} `json:"images"`
	} `json:"embed"`
}

// differs says how a stored record differs from the intent's, or "" when it is the record the
// intent describes (its text aside: the read-back compares that).
func (in intent) differs(s storedRecord) string {
	if s.Type != in.collection {
		return fmt.Sprintf("the record is a %q, not a %q", s.Type, in.collection)
	}
	switch in.action {
	case "like", "repost":
		var subj strongRef
		if err := json.Unmarshal(s.Subject, &subj); err != nil || subj != *in.subject {
			return fmt.Sprintf("its subject is %s, not %s %s", string(s.Subject), in.subject.URI, in.subject.CID)
		}
	case "follow":
		var did string
		if err := json.Unmarshal(s.Subject, &did); err != nil || did != in.follow {
			return fmt.Sprintf("its subject is %s, not %s", string(s.Subject), in.follow)
		}
	case "reply":
		if s.Reply == nil || s.Reply.Parent != *in.parent || s.Reply.Root != *in.root {
			return "its reply references differ from the request's"
		}
	case "quote":
		if s.Embed == nil || s.Embed.Type != embedRecord || s.Embed.Record == nil || *s.Embed.Record != *in.subject {
			return "its quoted record differs from the request's"
		}
	case "post":
		switch {
		case !in.reply && s.Reply != nil:
			return "it is a reply"
		case in.reply && s.Reply == nil:
			return "it is not a reply"
		case in.reply && in.parent != nil && (s.Reply.Parent != *in.parent || s.Reply.Root != *in.root):
			return "its reply references differ from the parent's"
		case in.reply && in.replyTo != "" && s.Reply.Parent.URI != in.replyTo:
			return fmt.Sprintf("it replies to %s, not to %s", s.Reply.Parent.URI, in.replyTo)
		}
	}
	if len(in.images) > 0 {
		if s.Embed == nil || s.Embed.Type != embedImages || len(s.Embed.Images) != len(in.images) {
			return "its images differ from the request's"
		}
		for i, im := range in.images {
			if got := s.Embed.Images[i]; got.Image.Ref.Link != im.cid() || got.Alt != im.Alt {
				return fmt.Sprintf("its image %d differs from the request's", i)
			}
		}
	}
	return ""
}

var (
	// NSID: at least three dot-separated segments, the last a name.
	nsidRE = regexp.MustCompile(`^[a-zA-Z]([a-zA-Z0-9-]{0,62})(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}))+\.[a-zA-Z][a-zA-Z0-9]{0,62}$`)
	// Record key syntax (atproto.com/specs/record-key); "." and ".." are refused separately.
	rkeyRE = regexp.MustCompile(`^[A-Za-z0-9._:~-]{1,512}$`)
	// A CID in its string form (base32 or base58): checked loosely, the PDS checks it fully.
	cidRE = regexp.MustCompile(`^[a-zA-Z0-9+=]{8,256}$`)
	// A BCP 47 language tag, loosely.
	langRE = regexp.MustCompile(`^[a-zA-Z]{2,8}(-[a-zA-Z0-9]{1,8})*$`)
)

func (r strongRef) check() error {
	if _, err := parseATURI(r.URI); err != nil {
		return err
	}
	if !cidRE.MatchString(r.CID) {
		return fmt.Errorf("cid %q is not a CID", r.CID)
	}
	return nil
}

// atURI is an at-uri naming one record: at://authority/collection/rkey.
type atURI struct {
	authority, collection, rkey string
}

func (u atURI) String() string { return "at://" + u.authority + "/" + u.collection + "/" + u.rkey }

// parseATURI parses an at-uri that names a record.
func parseATURI(s string) (atURI, error) {
	rest, ok := strings.CutPrefix(s, "at://")
	if !ok {
		return atURI{}, fmt.Errorf("%q is not an at:// URI", s)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return atURI{}, fmt.Errorf("%q does not name a record (at://authority/collection/rkey)", s)
	}
	u := atURI{parts[0], parts[1], parts[2]}
	switch {
	case !validDID(u.authority) && !validHandle(u.authority):
		return atURI{}, fmt.Errorf("%q: the authority is neither a DID nor a handle", s)
	case !nsidRE.MatchString(u.collection):
		return atURI{}, fmt.Errorf("%q: the collection is not an NSID", s)
	case !rkeyRE.MatchString(u.rkey) || u.rkey == "." || u.rkey == "..":
		return atURI{}, fmt.Errorf("%q: the record key is not valid", s)
	}
	return u, nil
}

// marshal is json.Marshal without HTML escaping: the bytes on the wire keep "<", ">" and "&"
// as the producer wrote them.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
