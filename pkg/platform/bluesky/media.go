package bluesky

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

// The limits of a post's images (app.bsky.embed.images): at most MaxImages, each at most
// MaxImageBytes, of one of ImageTypes.
const (
	MaxImages     = 4
	MaxImageBytes = 1_000_000
	embedImages   = "app.bsky.embed.images"
)

// ImageTypes returns the media types an image may have (a new slice at each call).
func ImageTypes() []string { return []string{"image/gif", "image/jpeg", "image/png", "image/webp"} }

// imageRef is one image of a post's request: the bytes by reference (a URL the dispatcher
// fetches) and pinned by their digest, type and size, so that the request, and so the delivery
// key, names the exact bytes, and Prepare renders the record's blob reference with no network
// call.
type imageRef struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
	MimeType string `json:"mime_type"`
	Size     int64  `json:"size"`
	Alt      string `json:"alt"`
}

func (im imageRef) check() error {
	u, err := url.Parse(im.URL)
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.Fragment != "":
		return fmt.Errorf("url %q: an absolute URL without user or fragment (https, as the account's media settings allow)", im.URL)
	case len(im.SHA256) != 64 || strings.ToLower(im.SHA256) != im.SHA256:
		return fmt.Errorf("sha256 %q: 64 lower-case hex digits", im.SHA256)
	case !slices.Contains(ImageTypes(), im.MimeType):
		return fmt.Errorf("mime_type %q: one of %s", im.MimeType, strings.Join(ImageTypes(), ", "))
	case im.Size <= 0 || im.Size > MaxImageBytes:
		return fmt.Errorf("size %d: 1 to %d bytes", im.Size, MaxImageBytes)
	}
	if _, err := hex.DecodeString(im.SHA256); err != nil {
		return fmt.Errorf("sha256 %q: %v", im.SHA256, err)
	}
	return nil
}

// cid is the blob's CID: version 1, the raw codec, a SHA-256 multihash, in base32.
func (im imageRef) cid() string {
	digest, _ := hex.DecodeString(im.SHA256)
	raw := append([]byte{0x01, 0x55, 0x12, 0x20}, digest...)
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
}

// blobRef is an atproto blob reference.
type blobRef struct {
	Type     string            `json:"$type"`
	Ref      map[string]string `json:"ref"`
	MimeType string            `json:"mimeType"`
	Size     int64             `json:"size"`
}

func (im imageRef) blob() blobRef {
	return blobRef{Type: "blob", Ref: map[string]string{"$link": im.cid()}, MimeType: im.MimeType, Size: im.Size}
}

// imagesEmbed is app.bsky.embed.images.
type imagesEmbed struct {
	Type   string       `json:"$type"`
	Images []embedImage `json:"images"`
}

type embedImage struct {
	Alt   string  `json:"alt"`
	Image blobRef `json:"image"`
}

// Stage uploads the request's images (com.atproto.repo.uploadBlob), none for a request
// without. Each is fetched from its URL, checked against its size and digest, and uploaded
// with the session's token; the PDS's answer must name the blob the prepared record
// references. An uploaded blob that no record references is a temporary file of the PDS that
// no person sees, so Stage may be repeated: the post that references the blobs, Send, is the
// one irreversible step. A fetch or an upload that failed is an error (the dispatcher stages
// again later, having sent nothing); a URL, redirect or address the account's media settings
// refuse (ErrMediaRefused), bytes that are not the ones the request names, or a blob the PDS
// stores otherwise, wrap platform.ErrUnsendable.
func (a *adapter) Stage(ctx context.Context, r platform.Request) error {
	in, err := parseIntent(r)
	if err != nil || len(in.images) == 0 {
		return nil // Prepare says what is wrong with the request
	}
	sess, err := a.sessions.get(ctx)
	if err != nil {
		return fmt.Errorf("bluesky: stage: %w", redactedError{err: err, secrets: a.secrets(nil)})
	}
	for i, im := range in.images {
		body, err := a.fetch(ctx, im)
		if err != nil {
			return fmt.Errorf("bluesky: stage: image %d: %w", i, err)
		}
		header := http.Header{"Content-Type": {im.MimeType}, "Accept": {"application/json"}, "Authorization": {"Bearer " + sess.access}}
		ex := a.client.Do(ctx, http.MethodPost, a.cfg.pds+"/xrpc/com.atproto.repo.uploadBlob", header, body)
		if ex.Status != http.StatusOK || ex.Err != nil {
			x := parseXRPCError(ex.Body)
			if sessionRefused(ex.Status, x) {
				a.sessions.markStale(sess.access)
			}
			msg := fmt.Sprintf("status %d %s", ex.Status, x.Name)
			if ex.Err != nil {
				msg += ": " + ex.Err.Error()
			}
			return fmt.Errorf("bluesky: stage: image %d: uploadBlob: %s", i, a.secrets(&sess).redact(msg))
		}
		var out struct {
			Blob blobRef `json:"blob"`
		}
		if err := json.Unmarshal(ex.Body, &out); err != nil {
			return fmt.Errorf("bluesky: stage: image %d: uploadBlob's answer: %w", i, err)
		}
		if want := im.blob(); out.Blob.Ref["$link"] != want.Ref["$link"] || out.Blob.MimeType != want.MimeType || out.Blob.Size != want.Size {
			return fmt.Errorf("bluesky: stage: image %d: the PDS stored %s (%s, %d bytes), the request names %s (%s, %d bytes): %w",
				i, out.Blob.Ref["$link"], out.Blob.MimeType, out.Blob.Size, want.Ref["$link"], want.MimeType, want.Size, platform.ErrUnsendable)
		}
	}
	return nil
}

// checkImages refuses the images whose URLs the account's media settings do not allow
// (ErrMediaRefused), before anything is fetched.
func (a *adapter) checkImages(images []imageRef) error {
	for i, im := range images {
		if err := a.cfg.media.checkURL(im.URL); err != nil {
			return fmt.Errorf("images[%d]: %w", i, err)
		}
	}
	return nil
}

// fetch reads an image's bytes from its URL, as the account's media settings allow
// (mediaPolicy: the URL, every redirect and every address dialed are checked), and checks them
// against its size and digest.
func (a *adapter) fetch(ctx context.Context, im imageRef) ([]byte, error) {
	if err := a.cfg.media.checkURL(im.URL); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, im.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.media.Do(req)
	if errors.Is(err, ErrMediaRefused) {
		return nil, fmt.Errorf("fetching %s: %w", im.URL, mediaRefusal(err))
	}
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", im.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: status %d", im.URL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, im.Size+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", im.URL, err)
	}
	sum := sha256.Sum256(body)
	if int64(len(body)) != im.Size || !bytes.Equal(sum[:], mustHex(im.SHA256)) {
		return nil, fmt.Errorf("fetching %s: %d bytes of digest %x, not the %d bytes of digest %s the request names: %w",
			im.URL, len(body), sum, im.Size, im.SHA256, platform.ErrUnsendable)
	}
	return body, nil
}

// mediaRefusal is the refusal inside err without the *url.Error and *net.OpError around it,
// which repeat the URL and the address.
func mediaRefusal(err error) error {
	for {
		switch e := err.(type) {
		case *url.Error:
			err = e.Err
		case *net.OpError:
			err = e.Err
		default:
			return err
		}
	}
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
