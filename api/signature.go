package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/klauspost/compress/gzip"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Digest-first keying (POST /v1/{ns}/keys and /lookup): a client that has
// sent a signature once may send only its SHA-256 (wire.HeaderSignatureSHA256)
// and an empty body. The server answers from the Keyer's memo (local, its
// file, then the fleet's shared memo) exactly as for the full signature, or
// with 428 signature_required when it does not know the digest, and the
// client sends the signature. 428 rather than 404: a lookup's 404 is a
// miss with a key, which a client compiles on; 428 is a status no proxy
// caches or retries and no old client mistakes for an answer.

// signatureRequired is the answer to a digest the server does not know.
func signatureRequired(d [32]byte) error {
	return Errorf(http.StatusPreconditionRequired, "signature_required",
		"This server does not know the signature with SHA-256 %x (or not for this backend and plugin version); send the full signature in the body.", d)
}

// gzipSlack is how many more wire bytes than the decompressed limit a gzip
// body may have: incompressible data grows by a few bytes per 64 KiB
// block, plus the header and trailer.
func gzipSlack(limit int64) int64 { return limit>>10 + 1<<10 }

// maxSignatureHint bounds the buffer a signature's read starts with; it
// doubles from there as bytes arrive.
const maxSignatureHint = 1 << 20

// readSignature reads the request's signature, undoing Content-Encoding
// gzip, into memory (the plugin needs it whole), bounded by limit in
// decompressed bytes and, all requests together, by keysAPI.sigmem. It
// returns the bytes, their digest (keying.SignatureDigest) and the memory
// charged for them, which the caller gives back once done with them, also
// after an error.
//
// # Errors
//
// 413 signature_too_large past limit (on the wire, or once decompressed:
// a zip bomb stops at limit+1 bytes); 400 bad_gzip for a corrupt gzip
// stream; 415 unsupported_encoding for another Content-Encoding; 400
// incomplete_body when the client stops early.
func (g *keysAPI) readSignature(c *fiber.Ctx, limit int64) (sig []byte, digest [32]byte, charged int64, err error) {
	gz, err := gzipped(c)
	if err != nil {
		return nil, [32]byte{}, 0, err
	}
	wireLimit := limit
	if gz {
		wireLimit += gzipSlack(limit)
	}
	cl := int64(c.Request().Header.ContentLength())
	if cl > wireLimit {
		return nil, [32]byte{}, 0, tooLarge(cl, limit)
	}
	body := bodyStream(c, wireLimit, func(n int) { g.bytesIn.Add(float64(n)) })
	var src io.Reader = body
	hint := 0
	switch {
	case gz && cl != 0:
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, [32]byte{}, 0, gzipError(err, limit)
		}
		defer zr.Close()
		src = zr
		if cl > 0 {
			hint = int(min(4*cl, limit, maxSignatureHint))
		}
	case cl > 0:
		// Not all of a large Content-Length at once: a client that
		// declares 64 MiB and sends nothing would hold it.
		hint = int(min(cl, maxSignatureHint))
	}
	lr := &io.LimitedReader{R: src, N: limit + 1}
	buf, charged, ok, err := g.sigmem.read(lr, hint)
	switch {
	case !ok:
		return nil, [32]byte{}, charged, g.sigmem.full(c)
	case err != nil && gz:
		return nil, [32]byte{}, charged, gzipError(err, limit)
	case errors.Is(err, store.ErrTooLarge):
		return nil, [32]byte{}, charged, tooLarge(-1, limit)
	case err != nil:
		return nil, [32]byte{}, charged, fmt.Errorf("read signature: %w", err)
	}
	if int64(len(buf)) > limit {
		if gz {
			return nil, [32]byte{}, charged, &Error{Status: http.StatusRequestEntityTooLarge, Code: "signature_too_large",
				Message: fmt.Sprintf("The gzip-compressed signature decompresses to more than %d bytes, the limit (it is measured decompressed).", limit),
				Err:     keying.ErrTooLarge}
		}
		return nil, [32]byte{}, charged, tooLarge(-1, limit)
	}
	return buf, keying.SignatureDigest(buf), charged, nil
}

// contentEncoding returns the request's Content-Encoding, trimmed and
// lowercased; "" for none or identity.
func contentEncoding(c *fiber.Ctx) string {
	enc := strings.ToLower(strings.TrimSpace(string(c.Request().Header.ContentEncoding())))
	if enc == "identity" {
		return ""
	}
	return enc
}

// gzipped reports whether the body is gzip-encoded; another encoding is 415.
func gzipped(c *fiber.Ctx) (bool, error) {
	enc := contentEncoding(c)
	switch enc {
	case "":
		return false, nil
	case "gzip", "x-gzip":
		return true, nil
	}
	return false, Errorf(http.StatusUnsupportedMediaType, "unsupported_encoding",
		"Content-Encoding %s is not supported on signatures; send gzip or no encoding.", echoCodings(enc))
}

// gzipError maps an error met while decompressing: the body's own errors
// (too large on the wire, cut short) keep their meaning; anything else is
// a corrupt stream.
func gzipError(err error, limit int64) error {
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return tooLarge(-1, limit)
	case errors.Is(err, errIncompleteBody):
		return fmt.Errorf("read signature: %w", err)
	}
	return &Error{Status: http.StatusBadRequest, Code: "bad_gzip",
		Message: sentence("the body is declared Content-Encoding: gzip but is not a valid gzip stream: " + err.Error()), Err: err}
}

// keyFor computes the key of the request's signature (see signatureKey)
// and records it as the request's key, so that its log line names the key
// as a GET or PUT by key does: an operator follows a program from its
// lookup's miss to its upload.
func (g *keysAPI) keyFor(c *fiber.Ctx) (keying.Result, error) {
	res, err := g.signatureKey(c)
	if err == nil {
		r := reqOf(c)
		r.Key, r.HasKey = res.Key, true
	}
	return res, err
}

// signatureKey computes the key of the request's signature: from its
// digest alone when the body is empty and wire.HeaderSignatureSHA256 names
// it (digest-first), else from the body, checked against that header when
// present.
func (g *keysAPI) signatureKey(c *fiber.Ctx) (keying.Result, error) {
	k := g.keyer
	if k == nil {
		return keying.Result{}, Errorf(http.StatusNotImplemented, "keying_disabled", "This server has no plugins configured; compute keys client-side.")
	}
	r := reqOf(c)
	declared := r.SignatureSHA256
	if g.noDigest {
		declared = nil // as a server that predates digest-first lookups
	}
	sig, digest, charged, err := g.readSignature(c, k.MaxSignatureBytes())
	// The signature's memory is held until it has been keyed.
	defer g.sigmem.give(charged)
	if err != nil {
		return keying.Result{}, err
	}
	if declared != nil && len(sig) == 0 {
		res, ok := k.LookupDigest(c.UserContext(), *declared, r.Backend)
		if !ok {
			g.digests.WithLabelValues("unknown").Inc()
			return keying.Result{}, signatureRequired(*declared)
		}
		g.digests.WithLabelValues("known").Inc()
		return res, nil
	}
	if declared != nil && *declared != digest {
		g.digests.WithLabelValues("mismatch").Inc()
		return keying.Result{}, Errorf(http.StatusBadRequest, "signature_digest_mismatch",
			"%s is %x but the signature's %d bytes (decompressed) hash to %x; send the SHA-256 of the exact signature bytes.",
			wire.HeaderSignatureSHA256, *declared, len(sig), digest)
	}
	return k.KeyDigest(c.UserContext(), sig, digest)
}
