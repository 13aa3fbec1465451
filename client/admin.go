package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cachesvc/cachesvc/wire"
)

// EntryInfo is one entry's metadata and provenance (admin routes).
type EntryInfo = wire.EntryInfo

// EntryFilter selects entries for the admin routes. The zero value selects
// every entry.
type EntryFilter struct {
	Writer, Run, Backend string
	// OlderThan and IdleFor are ages as wire.ParseAge reads them ("36h",
	// "30d"): entries created, or last accessed, longer ago than that.
	OlderThan, IdleFor string
	// MinSize and MaxSize bound the entry's size in bytes; 0 means no
	// bound.
	MinSize, MaxSize int64
}

// query returns f as the routes' query parameters.
func (f EntryFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"writer": f.Writer, "run": f.Run, "backend": f.Backend,
		"older_than": f.OlderThan, "idle_for": f.IdleFor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.MinSize > 0 {
		q.Set("min_size", strconv.FormatInt(f.MinSize, 10))
	}
	if f.MaxSize > 0 {
		q.Set("max_size", strconv.FormatInt(f.MaxSize, 10))
	}
	return q
}

// getJSON sends a GET to u and decodes the 200 answer into out.
func (c *Client) getJSON(ctx context.Context, u string, out any) error {
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s answer: %w", req.URL.Path, err)
	}
	return nil
}

// ListEntries calls fn with every entry of ns ("" for every namespace) that
// passes f, in key order, one page (at most wire.MaxListLimit entries) at a
// time, until the listing ends or fn returns an error, which it returns.
// fn may delete the entry it is given: the next page starts after it.
func (c *Client) ListEntries(ctx context.Context, ns string, f EntryFilter, fn func(EntryInfo) error) error {
	base := c.base.String() + "/v1/entries"
	if ns != "" {
		base = c.url(ns, "entries")
	}
	return eachPage(ctx, c, base, f.query(), fn)
}

// eachPage calls fn with every member of a paged listing at base (a JSON
// body {"entries": [...], "next": cursor}, as wire.EntryList), asking for
// the page after each cursor until one comes without, or fn returns an
// error, which it returns.
func eachPage[T any](ctx context.Context, c *Client, base string, q url.Values, fn func(T) error) error {
	for {
		var page struct {
			Entries []T    `json:"entries"`
			Next    string `json:"next"`
		}
		if err := c.getJSON(ctx, base+"?"+q.Encode(), &page); err != nil {
			return err
		}
		for _, e := range page.Entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Set("after", page.Next)
	}
}

// EntryMeta returns an entry's metadata and provenance (GET
// /v1/{ns}/entries/{key}/meta), without counting an access.
func (c *Client) EntryMeta(ctx context.Context, ns, key string) (EntryInfo, error) {
	var e EntryInfo
	err := c.getJSON(ctx, c.url(ns, "entries", key, "meta"), &e)
	return e, err
}

// Head returns the SHA-256 (hex) of the entry (ns, key); a miss is an
// *Error with Status 404 (IsNotFound).
func (c *Client) Head(ctx context.Context, ns, key string) (string, error) {
	req, err := c.newRequest(ctx, http.MethodHead, c.url(ns, "entries", key), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Header.Get(wire.HeaderContentSHA256), nil
}

// Delete removes the entry (ns, key); a miss is an *Error with Status 404.
func (c *Client) Delete(ctx context.Context, ns, key string) error {
	req, err := c.newRequest(ctx, http.MethodDelete, c.url(ns, "entries", key), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Export returns the export tar stream of the entries of ns that pass f
// (GET /v1/{ns}/export); the caller must close it. A complete stream ends
// with the wire.ExportMember member.
func (c *Client) Export(ctx context.Context, ns string, f EntryFilter) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, http.MethodGet, c.url(ns, "export")+"?"+f.query().Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Import streams body, a tar in the export format, into ns (POST
// /v1/{ns}/import) and returns what the server did. An error from body
// aborts the request: the member being sent is not stored.
func (c *Client) Import(ctx context.Context, ns string, body io.Reader) (wire.ImportResult, error) {
	var res wire.ImportResult
	req, err := c.newRequest(ctx, http.MethodPost, c.url(ns, "import"), body)
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, fmt.Errorf("decode import answer: %w", err)
	}
	return res, nil
}
