package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
)

// Reported entries (see store.Badger.Report). The tiered store asks the
// shared tier to quarantine an entry its hot tier quarantined: the record
// moves under quarantine/ (as a corrupt one's does) but the blob stays, so
// that no replica fetches the entry from the bucket any more, a writer's
// next Put of the key (different bytes: it recompiled) creates a new
// record, and Restore can move the record back.

// Quarantine moves the entry's record under quarantine/, keeping its blob.
// A miss returns store.ErrNotFound.
func (s *Store) Quarantine(ctx context.Context, ns string, key store.Key) error {
	if err := store.CheckNamespace("quarantine entry", ns); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	rec, q := s.entryName(ns, key), s.quarantineName(ns, key)
	if _, err := s.core.CopyObject(ctx, s.cfg.Bucket, rec, s.cfg.Bucket, q, nil,
		minio.CopySrcOptions{}, minio.PutObjectOptions{}); err != nil {
		return s.fault("quarantine entry", rec, err)
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, rec, minio.RemoveObjectOptions{}); err != nil {
		return s.fault("quarantine entry", rec, err)
	}
	s.usage.add(-1, 0, 0)
	s.log.Warn("s3 entry quarantined: clients could not load it", "namespace", ns, "key", key.String())
	return nil
}

// Restore moves a quarantined record back under entries/, unless a new
// record was written meanwhile (store.ErrConflict, or nothing to do when it
// names the same bytes). store.ErrNotFound when there is no quarantined
// record, or its blob is gone (a corrupt-blob quarantine).
func (s *Store) Restore(ctx context.Context, ns string, key store.Key) error {
	if err := store.CheckNamespace("restore entry", ns); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	q := s.quarantineName(ns, key)
	rc, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, q, minio.GetObjectOptions{})
	if err != nil {
		return s.fault("restore entry", q, err)
	}
	js, err := io.ReadAll(io.LimitReader(rc, maxRecordBytes))
	rc.Close()
	if err != nil {
		return s.fault("restore entry", q, err)
	}
	m, inline, err := decodeRecord(ns, key, js)
	if err != nil {
		return fmt.Errorf("restore s3://%s/%s: %w", s.cfg.Bucket, q, err)
	}
	if inline == nil {
		blob := s.blobName(m.SHA256)
		if _, err := s.core.StatObject(ctx, s.cfg.Bucket, blob, minio.StatObjectOptions{}); err != nil {
			return fmt.Errorf("restore entry %s/%s: its blob is gone: %w", ns, key, s.fault("stat blob", blob, err))
		}
	}
	res, err := s.putRecord(ctx, m, js)
	if err != nil {
		return err
	}
	if !res {
		if existing, err := s.readRecord(ctx, ns, key); err == nil && existing.SHA256 != m.SHA256 {
			return fmt.Errorf("restore entry %s/%s: a new entry was stored since: %w", ns, key, store.ErrConflict)
		}
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, q, minio.RemoveObjectOptions{}); err != nil {
		s.log.Warn("remove restored quarantine record failed", "namespace", ns, "key", key.String(), "object", q, "err", err)
	}
	return nil
}

// putRecord creates the entry record js unless one exists; created is false
// when one did.
func (s *Store) putRecord(ctx context.Context, m store.Meta, js []byte) (created bool, err error) {
	name := s.entryName(m.Namespace, m.Key)
	popts := minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true}
	if s.cfg.CheckThenWrite {
		if _, err := s.readRecord(ctx, m.Namespace, m.Key); err == nil {
			return false, nil
		}
	} else {
		popts.SetMatchETagExcept("*")
	}
	_, err = s.core.PutObject(ctx, s.cfg.Bucket, name, bytes.NewReader(js), int64(len(js)), "", "", popts)
	switch {
	case err == nil:
		s.usage.add(1, 0, int64(len(js)))
		return true, nil
	case isPreconditionFailed(err):
		return false, nil
	}
	return false, s.fault("restore entry", name, err)
}
